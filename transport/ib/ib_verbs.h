// ib_verbs.h: the ibverbs calls the transport makes, as a table of plain function pointers. The
// production table is filled at run time by dlopen("libibverbs.so.1") (strata never links
// libibverbs, so it runs on machines without rdma-core); the data-path calls that verbs.h defines
// as static inlines (post_send, post_recv, poll_cq, req_notify_cq) are wrapped by small functions
// that call those inlines. Tests inject their own table (tests/ib/fake_verbs.h).
#pragma once

#include <infiniband/verbs.h>

#include "transport/status.h"

namespace strata::ib {

struct Verbs {
  ibv_device** (*getDeviceList)(int* num);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* dev);
  ibv_context* (*openDevice)(ibv_device* dev);
  int (*closeDevice)(ibv_context* ctx);
  int (*queryDevice)(ibv_context* ctx, ibv_device_attr* attr);
  int (*queryPort)(ibv_context* ctx, uint8_t port, ibv_port_attr* attr);
  int (*queryGid)(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid);
  /// The GID's type (IBV_GID_TYPE_IB / ROCE_V1 / ROCE_V2); fails when unknown.
  int (*queryGidType)(ibv_context* ctx, uint8_t port, int index, uint32_t* type);
  ibv_pd* (*allocPd)(ibv_context* ctx);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t len, int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_comp_channel* (*createCompChannel)(ibv_context* ctx);
  int (*destroyCompChannel)(ibv_comp_channel* ch);
  ibv_cq* (*createCq)(ibv_context* ctx, int cqe, void* cqContext, ibv_comp_channel* ch, int vector);
  int (*destroyCq)(ibv_cq* cq);
  int (*getCqEvent)(ibv_comp_channel* ch, ibv_cq** cq, void** cqContext);
  void (*ackCqEvents)(ibv_cq* cq, unsigned n);
  int (*reqNotifyCq)(ibv_cq* cq, int solicitedOnly);
  int (*pollCq)(ibv_cq* cq, int n, ibv_wc* wc);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
};

/// The process's table over the real libibverbs, loaded once. Fails (with the reason) when the
/// library or one of its symbols is missing.
Status loadVerbs(const Verbs** out);

/// "success", "retry counter exceeded", ... for a work-completion status.
const char* wcStatusName(int status);

}  // namespace strata::ib
