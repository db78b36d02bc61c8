#include "trellis/comm/communicator.hpp"
#include "trellis/comm/shape_only_communicator.hpp"

#include "trellis/comm/counting_communicator.hpp"
#include "trellis/comm/mpi_communicator.hpp"
#include "trellis/core/error.hpp"

#ifdef TRELLIS_ENABLE_NCCL
#include "trellis/comm/nccl_communicator.hpp"
#endif

namespace trellis {

CommBackend parse_comm_backend(const std::string& name) {
#ifdef TRELLIS_ENABLE_NCCL
  constexpr bool have_nccl = true;
#else
  constexpr bool have_nccl = false;
#endif
  if (name == "mpi") return CommBackend::mpi;
  if (name == "auto") return have_nccl ? CommBackend::nccl : CommBackend::mpi;
  if (name == "nccl") {
    if (!have_nccl)
      throw ConfigError(
          "config key parallel.backend = nccl, but this build has no NCCL (configure with "
          "-DTRELLIS_ENABLE_CUDA=ON -DTRELLIS_ENABLE_NCCL=ON), use auto or mpi");
    return CommBackend::nccl;
  }
  throw ConfigError("config key parallel.backend = \"" + name + "\" is not one of auto, mpi, nccl");
}

const char* comm_backend_name(CommBackend backend) {
  return backend == CommBackend::nccl ? "nccl" : "mpi";
}

namespace {
std::unique_ptr<Communicator> make_backend(CommBackend backend, const MpiComm& comm) {
#ifdef TRELLIS_ENABLE_NCCL
  if (backend == CommBackend::nccl) return std::make_unique<NcclCommunicator>(comm);
#endif
  if (backend == CommBackend::nccl)
    throw ConfigError("parallel.backend = nccl is not available in this build");
  return std::make_unique<MpiCommunicator>(comm);
}
}  // namespace

std::unique_ptr<CountingCommunicator> make_communicator(CommBackend backend, const MpiComm& comm) {
  return std::make_unique<CountingCommunicator>(make_backend(backend, comm));
}

}  // namespace trellis

namespace trellis {

void ShapeOnlyCommunicator::refuse() {
  throw Error("a model built to be measured (ShapeOnlyCommunicator) cannot communicate");
}

}  // namespace trellis
