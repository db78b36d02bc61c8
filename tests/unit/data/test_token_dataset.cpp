// TokenDataset round trips: windows that cross shard and chunk boundaries, overlap and repeat
// read back exactly, for uint16 and uint32 streams, with independent transfer, collective
// transfer (one union read per shard) and the in-memory cache alike.
#include "catch.hpp"

#include "unit/support/token_helpers.hpp"

#include "trellis/data/token_dataset.hpp"
#include "trellis/data/token_read_plan.hpp"

using namespace trellis;
using namespace trellis::testing;

namespace {

enum class Mode { independent, collective, cached };
const char* mode_name(Mode mode) {
  return mode == Mode::independent  ? "independent"
         : mode == Mode::collective ? "collective"
                                    : "cached";
}

TokenDataset open_in(const std::string& spec, Mode mode) {
  Hdf5Tuning tuning;
  tuning.collective_transfer = mode == Mode::collective;
  TokenDataset data = TokenDataset::open(spec, MPI_COMM_SELF, tuning);
  if (mode == Mode::cached) data.cache_in_memory();
  return data;
}

}  // namespace

TEST_CASE("token plan cuts windows at shard boundaries and merges overlapping pieces", "[token]") {
  // Shards of 10, 0, 5 and 10 tokens: global [0,10) [10,10) [10,15) [15,25).
  const std::vector<std::int64_t> shard_begin{0, 10, 10, 15, 25};
  TokenReadPlan plan;
  plan.build({8, 3, 9, 20}, 5, shard_begin);
  const std::vector<TokenPiece>& pieces = plan.pieces();
  REQUIRE(pieces.size() == 6);
  // Window 0 [8, 13): 2 tokens of shard 0, skips the empty shard 1, 3 tokens of shard 2.
  CHECK(
      (pieces[0].shard == 0 && pieces[0].first == 8 && pieces[0].count == 2 && pieces[0].out == 0));
  CHECK(
      (pieces[1].shard == 2 && pieces[1].first == 0 && pieces[1].count == 3 && pieces[1].out == 2));
  CHECK(
      (pieces[2].shard == 0 && pieces[2].first == 3 && pieces[2].count == 5 && pieces[2].out == 5));
  CHECK((pieces[3].shard == 0 && pieces[3].first == 9 && pieces[3].count == 1 &&
         pieces[3].out == 10));
  CHECK((pieces[4].shard == 2 && pieces[4].first == 0 && pieces[4].count == 4 &&
         pieces[4].out == 11));
  CHECK((pieces[5].shard == 3 && pieces[5].first == 5 && pieces[5].count == 5 &&
         pieces[5].out == 15));

  plan.merge_runs();
  // Shard 0: [3, 8) and [8, 10) and [9, 10) are adjacent or overlapping: one run [3, 10).
  REQUIRE(plan.runs().size() == 3);
  CHECK((plan.runs()[0].first == 3 && plan.runs()[0].count == 7));
  CHECK((plan.runs()[1].first == 0 && plan.runs()[1].count == 4));  // shard 2
  CHECK((plan.runs()[2].first == 5 && plan.runs()[2].count == 5));  // shard 3
  CHECK(plan.run_begin(1) == 1);
  CHECK(plan.run_begin(2) == 1);
  CHECK(plan.slot_begin(2) == 7);
  CHECK(plan.slot_begin(4) == 16);
  CHECK(plan.piece_slot(0) == 5);  // position 8 of run [3, 10)
  CHECK(plan.piece_slot(3) == 6);  // position 9
  CHECK(plan.piece_slot(4) == 7);  // shard 2's run starts at slot 7
  CHECK(plan.piece_slot(5) == 11);

  CHECK_THROWS_AS(plan.build({21}, 5, shard_begin), Error);  // [21, 26) passes the end
  CHECK_THROWS_AS(plan.build({-1}, 5, shard_begin), Error);
  CHECK_THROWS_AS(plan.build({0}, 0, shard_begin), Error);
}

TEST_CASE("token windows round-trip across shards, uint16 and uint32", "[token]") {
  const std::string dir = fresh_test_dir("token_round_trip");
  for (std::int64_t vocab : {256, 100000}) {
    const TokenFileSpec spec = token_spec(vocab);
    const std::string glob =
        write_token_stream(dir + "/v" + std::to_string(vocab), spec, {37, 0, 50, 13});
    // Windows starting in every shard, crossing each boundary (including the empty shard),
    // overlapping, repeated, at both ends, and one spanning the whole stream.
    const std::vector<std::int64_t> starts{0, 30, 36, 37, 80, 85, 30, 85, 0};
    const int window = 15;
    for (Mode mode : {Mode::independent, Mode::collective, Mode::cached}) {
      INFO("vocab " << vocab << ", " << mode_name(mode));
      TokenDataset data = open_in(glob, mode);
      CHECK(data.size() == 100);
      CHECK(data.vocab_size() == vocab);
      CHECK(data.token_dtype() == (vocab == 256 ? TokenDType::u16 : TokenDType::u32));
      CHECK(data.shard_count() == 4);
      CHECK(data.shard_begin(3) == 87);
      CHECK(data.cached() == (mode == Mode::cached));

      std::vector<std::int32_t> out(starts.size() * window, -1);
      data.read_windows(starts, window, out.data());
      CHECK(wrong_tokens(starts, window, out, vocab) == 0);
      // Reuse of the scratch with a smaller and then a larger shape, and an empty batch.
      std::vector<std::int32_t> whole(100, -1);
      data.read_windows({0}, 100, whole.data());
      CHECK(wrong_tokens({0}, 100, whole, vocab) == 0);
      data.read_windows({}, window, out.data());
      data.read_windows({85, 2}, window, out.data());
      CHECK(wrong_tokens({85, 2}, window, std::vector<std::int32_t>(out.begin(), out.begin() + 30),
                         vocab) == 0);
      CHECK_THROWS_AS(data.read_windows({86}, window, out.data()), Error);  // 86 + 15 > 100
    }
  }
}

TEST_CASE("cached and uncached token reads agree", "[token]") {
  const std::string dir = fresh_test_dir("token_cached");
  const std::string glob = write_token_stream(dir + "/s", token_spec(256), {200, 1, 0, 99});
  TokenDataset uncached = open_in(glob, Mode::independent);
  TokenDataset cached = open_in(glob, Mode::cached);
  std::vector<std::int64_t> starts;
  for (std::int64_t s = 0; s + 33 <= 300; s += 7) starts.push_back(s);
  std::vector<std::int32_t> a(starts.size() * 33, -1), b(a.size(), -2);
  uncached.read_windows(starts, 33, a.data());
  cached.read_windows(starts, 33, b.data());
  CHECK(a == b);
  CHECK(wrong_tokens(starts, 33, a, 256) == 0);
}

TEST_CASE("a single token file opens by path, reports its attributes and moves", "[token]") {
  const std::string dir = fresh_test_dir("token_single");
  TokenFileSpec spec = token_spec(256, "val");
  spec.source = "austen (val); converted by tools/text_to_tokens.py";
  write_token_range(dir + "/val.h5", spec, 0, 10);
  TokenDataset data = TokenDataset::open(dir + "/val.h5", MPI_COMM_SELF);
  CHECK(data.tokenizer() == "bytes");
  CHECK(data.split() == "val");
  CHECK(data.source() == spec.source);
  CHECK(data.shard_path(0) == dir + "/val.h5");

  TokenDataset moved = std::move(data);
  std::vector<std::int32_t> out(10);
  moved.read_windows({0}, 10, out.data());
  CHECK(wrong_tokens({0}, 10, out, 256) == 0);
}

TEST_CASE("the token writer splits streams like the converter and rejects bad tokens", "[token]") {
  const std::string dir = fresh_test_dir("token_writer");
  std::vector<std::int32_t> tokens(10);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>(i);
  const std::vector<std::string> paths =
      write_token_shards(dir + "/s", 3, token_spec(256), tokens.data(), 10);
  REQUIRE(paths.size() == 3);
  TokenDataset data = TokenDataset::open(dir + "/s-*.h5", MPI_COMM_SELF);
  CHECK(data.shard_begin(1) == 3);  // floor(i * n / k) bounds: 3, 3, 4
  CHECK(data.shard_begin(2) == 6);

  tokens[4] = 256;
  CHECK_THROWS_AS(write_token_file(dir + "/bad.h5", token_spec(256), tokens.data(), 10), Error);
  TokenFileSpec narrow = token_spec(70000);
  narrow.dtype = TokenDType::u16;  // cannot hold ids >= 65536
  CHECK_THROWS_AS(write_token_file(dir + "/bad.h5", narrow, tokens.data(), 10), Error);
}
