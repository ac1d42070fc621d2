// data.cc: synthetic copy task and byte-level text windows.
#include "data.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace trainer {

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const char* kTextCandidates[] = {"/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/GPL-2",
                                 "/usr/share/common-licenses/Apache-2.0"};

}  // namespace

Data::Data(const Config& cfg) : cfg_(cfg), synthetic_(cfg.data == "synthetic") {
  half_ = cfg.seq / 2;
  symbols_ = std::min(cfg.vocab - 1, 16);
  if (synthetic_) {
    source_ = "synthetic copy task";
    return;
  }
  std::string path = cfg.textFile;
  if (path.empty())
    for (const char* c : kTextCandidates)
      if (std::ifstream(c).good()) {
        path = c;
        break;
      }
  std::ifstream in(path, std::ios::binary);
  if (path.empty() || !in) throw std::runtime_error("cannot read a text corpus (set --text-file)");
  corpus_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (corpus_.size() < size_t(cfg.seq) + 2) throw std::runtime_error("text corpus " + path + " is too short");
  std::vector<double> cnt(256, 0);
  for (unsigned char c : corpus_) cnt[c] += 1;
  for (double c : cnt)
    if (c > 0) entropy_ -= c / double(corpus_.size()) * std::log(c / double(corpus_.size()));
  source_ = path + " (" + std::to_string(corpus_.size()) + " bytes)";
}

void Data::sequence(int step, long k, int* x) const {
  const int T = cfg_.seq;
  uint64_t h = mix(mix(cfg_.seed ^ 0x5eedull) ^ mix(uint64_t(step) * 1000003ull + uint64_t(k)));
  if (!synthetic_) {
    size_t start = h % (corpus_.size() - size_t(T) - 1);
    for (int t = 0; t <= T; ++t) x[t] = corpus_[start + size_t(t)];
    return;
  }
  for (int t = 0; t < half_; ++t) {
    h = mix(h);
    x[t] = 1 + int(h % uint64_t(symbols_));
  }
  for (int t = half_; t <= T; ++t) x[t] = x[t - half_];
}

long Data::scoredPerSequence() const { return synthetic_ ? cfg_.seq - (half_ - 1) : cfg_.seq; }

double Data::chanceLoss() const { return synthetic_ ? std::log(double(symbols_)) : entropy_; }

std::vector<int> cpPositions(int T, int cp, int r) {
  std::vector<int> pos;
  if (cp == 1) {
    for (int t = 0; t < T; ++t) pos.push_back(t);
    return pos;
  }
  const int Tc = T / (2 * cp);
  for (int chunk : {r, 2 * cp - 1 - r})
    for (int t = chunk * Tc; t < (chunk + 1) * Tc; ++t) pos.push_back(t);
  return pos;
}

MicroBatch makeMicroBatch(const Data& d, const Config& cfg, const Mesh& m, int step, int mb) {
  MicroBatch out;
  out.b = cfg.seqPerMicro();
  std::vector<int> pos = cpPositions(cfg.seq, m.size[CP], m.coord[CP]);
  out.Tl = int(pos.size());
  const long first = long(mb) * (cfg.batch / cfg.microbatches) + long(m.dataRank()) * out.b;
  out.step = step, out.seq0 = first;
  std::vector<int> x(size_t(cfg.seq) + 1);
  for (int i = 0; i < out.b; ++i) {
    d.sequence(step, first + i, x.data());
    for (int t : pos) {
      out.tok.push_back(x[size_t(t)]);
      out.tgt.push_back(d.scored(t) ? x[size_t(t) + 1] : -1);
      out.pos.push_back(t);
    }
  }
  return out;
}

}  // namespace trainer
