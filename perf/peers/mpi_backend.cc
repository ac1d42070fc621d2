// mpi_backend.cc: the MPI call for each collective, with MPI_IN_PLACE for the in-place column.
#include "perf/peers/mpi_backend.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

namespace strata::perf {
namespace {

// MPI types: reductions need a real arithmetic type; data movement only needs the element size.
MPI_Datatype mpiType(DType t) {
  switch (t) {
    case strataInt8: return MPI_INT8_T;
    case strataUint8: case strataFloat8e4m3: case strataFloat8e5m2: return MPI_UINT8_T;
    case strataInt32: return MPI_INT32_T;
    case strataUint32: return MPI_UINT32_T;
    case strataInt64: return MPI_INT64_T;
    case strataUint64: return MPI_UINT64_T;
    case strataFloat16: case strataBfloat16: return MPI_UINT16_T;
    case strataFloat32: return MPI_FLOAT;
    default: return MPI_DOUBLE;
  }
}

MPI_Op mpiOp(Op op) {
  switch (op) {
    case Op::Prod: return MPI_PROD;
    case Op::Max: return MPI_MAX;
    case Op::Min: return MPI_MIN;
    default: return MPI_SUM;
  }
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(fmt::format("{} failed: {}", what, std::string(msg, len)));
}

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &nranks_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

std::string MpiBackend::describe() const {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, len);
  s = s.substr(0, s.find_first_of(",\n"));
  return s;
}

std::string MpiBackend::unsupported(Coll coll, DType t, Op op) const {
  if (!collReduces(coll)) return "";
  if (t == strataFloat16 || t == strataBfloat16 || t == strataFloat8e4m3 || t == strataFloat8e5m2)
    return fmt::format("MPI has no {} reductions (sum/prod/max/min need int8..uint64, float, double)", dtypeName(t));
  if (op == Op::Avg || op == Op::MulSum)
    return fmt::format("MPI has no {} reduction (use sum, prod, max, min)", opName(op));
  return "";
}

const void* MpiBackend::result(const CollCall& c) const {
  return (c.coll == Coll::ReduceScatter && c.inPlace) ? c.recvBase : c.recv;
}

void MpiBackend::run(const CollCall& c) {
  const int n = static_cast<int>(c.layout.count);
  const MPI_Datatype t = mpiType(c.dtype);
  const MPI_Op op = mpiOp(c.op);
  const bool root = rank_ == c.root;
  const void* in = c.inPlace ? MPI_IN_PLACE : c.send;
  switch (c.coll) {
    case Coll::AllReduce: return check(MPI_Allreduce(in, c.recv, n, t, op, comm_), "MPI_Allreduce");
    case Coll::ReduceScatter:  // in place: the whole input is in the buffer, the result lands at its start
      return check(MPI_Reduce_scatter_block(in, c.inPlace ? c.recvBase : c.recv, n, t, op, comm_),
                   "MPI_Reduce_scatter_block");
    case Coll::AllGather: return check(MPI_Allgather(in, n, t, c.recv, n, t, comm_), "MPI_Allgather");
    case Coll::Broadcast:  // MPI_Bcast is in place; out of place, the root copies first (as NCCL does)
      if (!c.inPlace && root) std::memcpy(c.recv, c.send, c.layout.count * dtypeSize(c.dtype));
      return check(MPI_Bcast(c.recv, n, t, c.root, comm_), "MPI_Bcast");
    case Coll::Reduce:
      if (c.inPlace && !root) return check(MPI_Reduce(c.recv, nullptr, n, t, op, c.root, comm_), "MPI_Reduce");
      return check(MPI_Reduce(in, c.recv, n, t, op, c.root, comm_), "MPI_Reduce");
    case Coll::AllToAll: return check(MPI_Alltoall(in, n, t, c.recv, n, t, comm_), "MPI_Alltoall");
    case Coll::Gather:
      return check(MPI_Gather(c.inPlace && root ? MPI_IN_PLACE : c.send, n, t, c.recv, n, t, c.root, comm_),
                   "MPI_Gather");
    case Coll::Scatter:
      return check(MPI_Scatter(c.send, n, t, c.inPlace && root ? MPI_IN_PLACE : c.recv, n, t, c.root, comm_),
                   "MPI_Scatter");
    case Coll::SendRecv: {
      const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
      if (c.inPlace)
        return check(MPI_Sendrecv_replace(c.recv, n, t, next, 0, prev, 0, comm_, MPI_STATUS_IGNORE),
                     "MPI_Sendrecv_replace");
      return check(MPI_Sendrecv(c.send, n, t, next, 0, c.recv, n, t, prev, 0, comm_, MPI_STATUS_IGNORE),
                   "MPI_Sendrecv");
    }
  }
}

void MpiBackend::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

double MpiBackend::allReduce(double v, Agg how) {
  const MPI_Op op = how == Agg::Min ? MPI_MIN : how == Agg::Max ? MPI_MAX : MPI_SUM;
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, op, comm_), "MPI_Allreduce");
  return v;
}

void MpiBackend::allGather(const void* mine, void* all, size_t bytes) {
  const int b = static_cast<int>(bytes);
  check(MPI_Allgather(mine, b, MPI_BYTE, all, b, MPI_BYTE, comm_), "MPI_Allgather");
}

}  // namespace strata::perf
