// Communicator (MPI backend): every collective and point-to-point call with exact expected
// values, over a duplicated world communicator and over each axis of a process grid (tp = 2
// when the world size is even), at whatever world size the test runs.
//
// Only CHECKs (never REQUIRE) after the first collective, so a failing rank still takes part
// in every later collective instead of leaving the others waiting.
#include "catch.hpp"

#include "unit/support/nn_helpers.hpp"

#include "trellis/comm/counting_communicator.hpp"
#include "trellis/comm/mpi_comm.hpp"
#include "trellis/comm/mpi_communicator.hpp"
#include "trellis/comm/process_grid.hpp"

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

using namespace trellis;
using trellis::test::to_device;
using trellis::test::to_host;

namespace {

constexpr std::size_t kCount = 37;  // per-rank block: odd, so nothing lines up by accident

std::vector<float> values(std::size_t count, float (*f)(std::size_t)) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = f(i);
  return v;
}

// Each collective of the interface over `comm`, every result compared exactly.
void check_collectives(Communicator& comm, const std::string& what) {
  INFO(what << ": rank " << comm.rank() << " of " << comm.size());
  const int r = comm.rank();
  const int p = comm.size();
  const auto rf = static_cast<float>(r);
  const auto pf = static_cast<float>(p);
  const std::size_t n = kCount;
  const auto ru = static_cast<std::size_t>(r);
  CHECK(comm.backend() == CommBackend::mpi);

  // all_reduce: sum, max, min (signs alternate so max and min pick different ranks).
  {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = (rf + 1.0f) + static_cast<float>(i);
    FloatView sum = to_device("sum", x);
    for (std::size_t i = 0; i < n; ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * (rf + 1.0f);
    FloatView max = to_device("max", x);
    FloatView min = to_device("min", x);
    comm.all_reduce(sum.data(), n, ReduceOp::sum);
    comm.all_reduce(max.data(), n, ReduceOp::max);
    comm.all_reduce(min.data(), n, ReduceOp::min);
    const auto hs = to_host(sum), hmax = to_host(max), hmin = to_host(min);
    bool ok = true;
    for (std::size_t i = 0; i < n; ++i) {
      const auto fi = static_cast<float>(i);
      ok = ok && hs[i] == pf * (pf + 1.0f) / 2.0f + pf * fi;
      ok = ok && hmax[i] == (i % 2 ? pf : -1.0f);
      ok = ok && hmin[i] == (i % 2 ? 1.0f : -pf);
    }
    CHECK(ok);
  }

  // start_all_reduce completed by wait(), and by polling test().
  {
    FloatView a = to_device("a", std::vector<float>(n, rf));
    FloatView b = to_device("b", std::vector<float>(n, 2.0f * rf));
    CommRequest ra = comm.start_all_reduce(a.data(), n, ReduceOp::sum);
    CommRequest rb = comm.start_all_reduce(b.data(), n, ReduceOp::sum);
    CHECK(ra.pending == (p > 1));
    comm.wait(ra);
    CHECK_FALSE(ra.pending);
    comm.wait(ra);  // a completed request: no-op
    long polls = 0;
    while (!comm.test(rb)) ++polls;
    CHECK_FALSE(rb.pending);
    CHECK(comm.test(rb));
    const float rank_sum = pf * (pf - 1.0f) / 2.0f;
    CHECK(to_host(a) == std::vector<float>(n, rank_sum));
    CHECK(to_host(b) == std::vector<float>(n, 2.0f * rank_sum));
    CHECK(polls >= 0);
  }

  // reduce_scatter: send[q * n + i] = 1000 r + q n + i; rank r gets the sum of block r.
  {
    std::vector<float> x(static_cast<std::size_t>(p) * n);
    for (std::size_t j = 0; j < x.size(); ++j) x[j] = 1000.0f * rf + static_cast<float>(j);
    FloatView send = to_device("send", x);
    FloatView recv("recv", n);
    FloatView recv2("recv2", n);
    comm.reduce_scatter(send.data(), recv.data(), n, ReduceOp::sum);
    CommRequest req = comm.start_reduce_scatter(send.data(), recv2.data(), n, ReduceOp::sum);
    comm.wait(req);
    std::vector<float> expected(n);
    for (std::size_t i = 0; i < n; ++i)
      expected[i] = 1000.0f * pf * (pf - 1.0f) / 2.0f + pf * static_cast<float>(ru * n + i);
    CHECK(to_host(recv) == expected);
    CHECK(to_host(recv2) == expected);
    CHECK(to_host(send) == x);  // out of place: send untouched
  }

  // all_gather out of place (blocking and started), and in place.
  {
    std::vector<float> mine(n);
    for (std::size_t i = 0; i < n; ++i) mine[i] = 100.0f * rf + static_cast<float>(i);
    std::vector<float> expected(static_cast<std::size_t>(p) * n);
    for (std::size_t j = 0; j < expected.size(); ++j)
      expected[j] = 100.0f * static_cast<float>(j / n) + static_cast<float>(j % n);
    FloatView send = to_device("send", mine);
    FloatView recv("recv", static_cast<std::size_t>(p) * n);
    comm.all_gather(send.data(), recv.data(), n);
    CHECK(to_host(recv) == expected);

    FloatView recv2("recv2", static_cast<std::size_t>(p) * n);
    CommRequest req = comm.start_all_gather(send.data(), recv2.data(), n);
    comm.wait(req);
    CHECK(to_host(recv2) == expected);

    std::vector<float> in_place(static_cast<std::size_t>(p) * n, -7.0f);
    std::copy(mine.begin(), mine.end(), in_place.begin() + static_cast<std::ptrdiff_t>(ru * n));
    FloatView both = to_device("both", in_place);
    comm.all_gather(both.data() + ru * n, both.data(), n);
    CHECK(to_host(both) == expected);
  }

  // broadcast from the last rank (non-zero whenever p > 1).
  {
    const int root = p - 1;
    FloatView data = to_device(
        "bcast", r == root ? values(n, [](std::size_t i) { return 42.0f + static_cast<float>(i); })
                           : std::vector<float>(n, -1.0f));
    comm.broadcast(data.data(), n, root);
    CHECK(to_host(data) == values(n, [](std::size_t i) { return 42.0f + static_cast<float>(i); }));
  }

  // Blocking send/recv between pairs (0,1), (2,3), ...; an odd last rank sits out.
  {
    const int peer = r % 2 == 0 ? r + 1 : r - 1;
    if (peer < p) {
      std::vector<float> mine(n);
      for (std::size_t i = 0; i < n; ++i) mine[i] = 10.0f * rf + static_cast<float>(i);
      FloatView out = to_device("out", mine);
      FloatView in("in", n);
      if (r % 2 == 0) {
        comm.send(out.data(), n, peer);
        comm.recv(in.data(), n, peer);
      } else {
        comm.recv(in.data(), n, peer);
        comm.send(out.data(), n, peer);
      }
      std::vector<float> expected(n);
      for (std::size_t i = 0; i < n; ++i)
        expected[i] = 10.0f * static_cast<float>(peer) + static_cast<float>(i);
      CHECK(to_host(in) == expected);
    }
  }

  // Ring inside a group: everyone sends to the next rank and receives from the previous one
  // at once (blocking calls in this order would deadlock without the group).
  {
    const int next = (r + 1) % p;
    const int prev = (r + p - 1) % p;
    std::vector<float> mine(n);
    for (std::size_t i = 0; i < n; ++i) mine[i] = 10.0f * rf + static_cast<float>(i);
    FloatView out = to_device("out", mine);
    FloatView in("in", n);
    comm.group_start();
    comm.send(out.data(), n, next);
    comm.recv(in.data(), n, prev);
    comm.group_end();
    std::vector<float> expected(n);
    for (std::size_t i = 0; i < n; ++i)
      expected[i] = 10.0f * static_cast<float>(prev) + static_cast<float>(i);
    CHECK(to_host(in) == expected);
    CHECK_THROWS_AS(comm.group_end(), Error);  // no group open
  }

  // Empty messages are no-ops that need no matching call.
  {
    FloatView x("x", 1);
    comm.all_reduce(x.data(), 0, ReduceOp::sum);
    CommRequest req = comm.start_all_reduce(x.data(), 0, ReduceOp::sum);
    CHECK_FALSE(req.pending);
  }
}

}  // namespace

TEST_CASE("MpiCommunicator over a duplicated world communicator", "[comm_mpi]") {
  const MpiComm world = MpiComm::duplicate(MPI_COMM_WORLD);
  MpiCommunicator comm(world);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(comm.size() == size);
  check_collectives(comm, "world");
}

TEST_CASE("MpiCommunicator over each axis of a process grid", "[comm_mpi]") {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int tp = size % 2 == 0 ? 2 : 1;
  ProcessGrid grid(MPI_COMM_WORLD, tp, 1, CommBackend::mpi);
  for (Axis axis : {Axis::tp, Axis::dp, Axis::pp}) {
    Communicator& comm = grid.communicator(axis);
    CHECK(comm.size() == grid.size(axis));
    CHECK(comm.rank() == grid.coords().along(axis));
    check_collectives(comm, axis_name(axis));
  }
}

TEST_CASE("make_communicator counts what it issues, by kind and bytes", "[comm_mpi]") {
  const MpiComm world = MpiComm::duplicate(MPI_COMM_WORLD);
  const std::unique_ptr<CountingCommunicator> comm = make_communicator(CommBackend::mpi, world);
  const int p = comm->size(), r = comm->rank();
  const std::size_t n = kCount;
  FloatView x("x", n * static_cast<std::size_t>(p)), y("y", n * static_cast<std::size_t>(p));
  comm->all_reduce(x.data(), n, ReduceOp::sum);
  CommRequest request = comm->start_all_reduce(x.data(), n, ReduceOp::sum);
  comm->wait(request);
  comm->reduce_scatter(x.data(), y.data(), n, ReduceOp::sum);
  comm->all_gather(x.data(), y.data(), n);
  comm->group_start();
  comm->send(x.data(), n, (r + 1) % p);
  comm->recv(y.data(), n, (r + p - 1) % p);
  comm->group_end();
  const CollectiveTally& t = comm->tally();
  if (p == 1) {
    CHECK(t.empty());  // nothing moves over one rank
    return;
  }
  const double block = 4.0 * n;
  CHECK(t[CollectiveKind::all_reduce].calls == 2);
  CHECK(t[CollectiveKind::all_reduce].bytes == 2 * block);
  // Reduce-scatter and all-gather count the whole tensor, p blocks.
  CHECK(t[CollectiveKind::reduce_scatter].calls == 1);
  CHECK(t[CollectiveKind::reduce_scatter].bytes == p * block);
  CHECK(t[CollectiveKind::all_gather].bytes == p * block);
  CHECK(t[CollectiveKind::send].calls == 1);
  CHECK(t[CollectiveKind::recv].bytes == block);
  CHECK(t[CollectiveKind::broadcast].calls == 0);
  const CollectiveTally before = t;
  comm->all_reduce(x.data(), n, ReduceOp::sum);
  CHECK((comm->tally() - before)[CollectiveKind::all_reduce].calls == 1);
  CHECK(comm->blocked_seconds() > 0);  // the backend's blocked time shows through
}
