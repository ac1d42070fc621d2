// lazy_connection.cc: queue while opening, hand over in posting order, then forward.
#include "transport/lazy_connection.h"

namespace strata {

LazyConnection::LazyConnection(int peer, const char* kind, std::unique_ptr<ConnectionOpener> opener)
    : peer_(peer), kind_(kind), opener_(std::move(opener)) {}

void LazyConnection::postSend(Transfer* t) {
  if (inner_) inner_->postSend(t);
  else queued_.push_back(t);
}

void LazyConnection::postRecv(Transfer* t) {
  if (inner_) inner_->postRecv(t);
  else queued_.push_back(t);
}

Status LazyConnection::progress(bool* progressed) {
  if (!inner_) {
    if (!failed_.ok()) return failed_;
    Status st = opener_->poll(&inner_);
    if (!st.ok()) {
      failed_ = st;
      return st;
    }
    if (!inner_) return OkStatus();
    opener_.reset();
    // Sends and receives are separate FIFOs: replaying in posting order keeps both orders.
    for (Transfer* t : queued_) {
      if (t->kind == Transfer::Send) inner_->postSend(t);
      else inner_->postRecv(t);
    }
    queued_.clear();
    queued_.shrink_to_fit();
    *progressed = true;
  }
  return inner_->progress(progressed);
}

void LazyConnection::addWaitSources(WaitSet* ws) {
  if (inner_) inner_->addWaitSources(ws);
  else if (opener_ && failed_.ok()) opener_->addWaitSources(ws);
}

void LazyConnection::sendFailure(const std::string& reason) {
  if (inner_) inner_->sendFailure(reason);
}

}  // namespace strata
