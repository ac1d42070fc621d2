// ib_verbs.cc: the production verbs table, resolved with dlopen/dlsym from libibverbs.so.1.
#include "transport/ib/ib_verbs.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace strata::ib {
namespace {

// Wrappers of verbs.h's static inlines: they call through the provider's ops table.
int postSendInline(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return ibv_post_send(qp, wr, bad); }
int postRecvInline(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(qp, wr, bad); }
int pollCqInline(ibv_cq* cq, int n, ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); }
int reqNotifyInline(ibv_cq* cq, int solicitedOnly) { return ibv_req_notify_cq(cq, solicitedOnly); }

using QueryGidExFn = int (*)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t, size_t);
QueryGidExFn gQueryGidEx = nullptr;
const char* (*gDevName)(ibv_device*) = nullptr;

// GID type: ibv_query_gid_ex where the library has it, else the sysfs file rdma-core also reads.
int queryGidTypeImpl(ibv_context* ctx, uint8_t port, int index, uint32_t* type) {
  if (gQueryGidEx) {
    ibv_gid_entry e{};
    if (gQueryGidEx(ctx, port, static_cast<uint32_t>(index), &e, 0, sizeof(e)) == 0) {
      *type = e.gid_type;
      return 0;
    }
  }
  char path[256];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
           gDevName(ctx->device), static_cast<unsigned>(port), index);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  char buf[64] = {0};
  const bool got = fgets(buf, sizeof(buf), f) != nullptr;
  fclose(f);
  if (!got) return -1;
  if (strncmp(buf, "RoCE v2", 7) == 0) *type = IBV_GID_TYPE_ROCE_V2;
  else if (strncmp(buf, "IB/RoCE v1", 10) == 0) *type = IBV_GID_TYPE_ROCE_V1;
  else return -1;
  return 0;
}

template <typename F>
bool resolve(void* lib, const char* name, F* out, std::string* missing) {
  void* p = dlvsym(lib, name, "IBVERBS_1.1");  // the current ABI of versioned symbols
  if (!p) p = dlsym(lib, name);
  if (!p) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
    return false;
  }
  *out = reinterpret_cast<F>(p);
  return true;
}

}  // namespace

Status loadVerbs(const Verbs** out) {
  static std::once_flag once;
  static Verbs table;
  static Status result;
  std::call_once(once, [] {
    void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      result = systemError("ibverbs: cannot load libibverbs.so.1 ({})", dlerror());
      return;
    }
    std::string missing;
    Verbs v{};
    resolve(lib, "ibv_get_device_list", &v.getDeviceList, &missing);
    resolve(lib, "ibv_free_device_list", &v.freeDeviceList, &missing);
    resolve(lib, "ibv_get_device_name", &v.getDeviceName, &missing);
    resolve(lib, "ibv_open_device", &v.openDevice, &missing);
    resolve(lib, "ibv_close_device", &v.closeDevice, &missing);
    resolve(lib, "ibv_query_device", &v.queryDevice, &missing);
    resolve(lib, "ibv_query_port", &v.queryPort, &missing);
    resolve(lib, "ibv_query_gid", &v.queryGid, &missing);
    resolve(lib, "ibv_alloc_pd", &v.allocPd, &missing);
    resolve(lib, "ibv_dealloc_pd", &v.deallocPd, &missing);
    resolve(lib, "ibv_reg_mr", &v.regMr, &missing);
    resolve(lib, "ibv_dereg_mr", &v.deregMr, &missing);
    resolve(lib, "ibv_create_comp_channel", &v.createCompChannel, &missing);
    resolve(lib, "ibv_destroy_comp_channel", &v.destroyCompChannel, &missing);
    resolve(lib, "ibv_create_cq", &v.createCq, &missing);
    resolve(lib, "ibv_destroy_cq", &v.destroyCq, &missing);
    resolve(lib, "ibv_get_cq_event", &v.getCqEvent, &missing);
    resolve(lib, "ibv_ack_cq_events", &v.ackCqEvents, &missing);
    resolve(lib, "ibv_create_qp", &v.createQp, &missing);
    resolve(lib, "ibv_modify_qp", &v.modifyQp, &missing);
    resolve(lib, "ibv_destroy_qp", &v.destroyQp, &missing);
    if (!missing.empty()) {
      result = systemError("ibverbs: libibverbs.so.1 lacks {}", missing);
      return;
    }
    std::string ignored;
    resolve(lib, "_ibv_query_gid_ex", &gQueryGidEx, &ignored);  // optional (rdma-core >= 32)
    gDevName = v.getDeviceName;
    v.queryGidType = queryGidTypeImpl;
    v.postSend = postSendInline;
    v.postRecv = postRecvInline;
    v.pollCq = pollCqInline;
    v.reqNotifyCq = reqNotifyInline;
    table = v;
  });
  if (!result.ok()) return result;
  *out = &table;
  return OkStatus();
}

const char* wcStatusName(int status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "work request flushed (queue pair in error)";
    case IBV_WC_MW_BIND_ERR: return "memory window bind error";
    case IBV_WC_BAD_RESP_ERR: return "bad response";
    case IBV_WC_LOC_ACCESS_ERR: return "local access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded (peer unreachable or gone)";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "receiver-not-ready retry counter exceeded";
    case IBV_WC_REM_ABORT_ERR: return "remote aborted";
    case IBV_WC_FATAL_ERR: return "fatal error";
    case IBV_WC_RESP_TIMEOUT_ERR: return "response timeout";
    default: return "error";
  }
}

}  // namespace strata::ib
