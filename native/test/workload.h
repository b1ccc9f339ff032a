// Request streams for core-test: Workload, chained multi-session streams
// (turns, resends, prefixes, branches, forks, shared system prefixes), and
// GarbageWorkload, ids that are not chained (a small pool reused at any depth,
// duplicates, ids of other chains swapped in). Every choice comes from the
// caller's Rng, so a seed replays the same stream.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rng.h"

namespace core_test {

struct Request {
  std::vector<uint64_t> ids;
  uint64_t session = 0;
};

class Workload {
 public:
  Workload(Rng& rng, uint64_t salt) : rng_(rng), salt_(salt << 32) {
    // Shared system prefixes, one nested in another, lengths around the stride.
    static const std::vector<uint32_t> a = {1, 3, 15, 16};
    static const std::vector<uint32_t> b = {17, 31, 32, 33};
    static const std::vector<uint32_t> c = {15, 40, 64, 65};
    shared_.push_back(freshRun(rng_.pick(a)));
    shared_.push_back(shared_[0]);
    append(shared_[1], rng_.pick(b) - static_cast<uint32_t>(shared_[0].size()));
    shared_.push_back(freshRun(rng_.pick(c)));
    shared_.push_back(freshRun(static_cast<uint32_t>(rng_.range(100, 300))));
  }

  // A never-used id (chained ids are fresh per prefix).
  uint64_t fresh() { return salt_ | ++counter_; }

  Request next() {
    if (sessions_.empty() || rng_.percent(12)) return startSession();
    // Mostly the recent sessions, sometimes any.
    const size_t count = sessions_.size();
    const size_t index = rng_.percent(70) ? count - 1 - rng_.below(std::min<size_t>(count, 8)) : rng_.below(count);
    Session& s = sessions_[index];
    const uint64_t r = rng_.below(100);
    if (r < 55) {
      // Next turn: the previous prompt minus its partial last block, then new blocks.
      const size_t keep = s.prompt.empty() ? 0 : s.prompt.size() - 1;
      const uint32_t add = appendLength(rng_);
      if (keep + add > kMaxChain) return startSession();
      remember(s);
      s.prompt.resize(keep);
      append(s.prompt, add);
      return Request{s.prompt, s.key};
    }
    if (r < 65) return Request{s.prompt, s.key};  // a resend
    if (r < 77) {
      // A prefix of the prompt (possibly empty): touches without inserting.
      const uint32_t cut = cutPoint(rng_, 0, static_cast<uint32_t>(s.prompt.size()));
      return Request{std::vector<uint64_t>(s.prompt.begin(), s.prompt.begin() + cut), s.key};
    }
    if (r < 92) {
      // A branch (retry, edit) from an earlier prompt of the session.
      const std::vector<uint64_t> base = s.past.empty() || rng_.percent(30) ? s.prompt : rng_.pick(s.past);
      if (base.empty()) return startSession();
      const uint32_t cut = cutPoint(rng_, 1, static_cast<uint32_t>(base.size()));
      remember(s);
      s.prompt.assign(base.begin(), base.begin() + cut);
      append(s.prompt, std::min<uint32_t>(appendLength(rng_), kMaxChain - cut));
      return Request{s.prompt, s.key};
    }
    // A new session forked from this one's prompt (shares a long prefix).
    const std::vector<uint64_t> base = s.prompt;
    Session forked;
    forked.key = ++sessionCounter_;
    const uint32_t cut = cutPoint(rng_, 0, static_cast<uint32_t>(base.size()));
    forked.prompt.assign(base.begin(), base.begin() + cut);
    append(forked.prompt, std::min<uint32_t>(appendLength(rng_), kMaxChain - cut));
    return push(std::move(forked));
  }

  // An id from a recent prompt, at a random depth (held or not on any instance).
  uint64_t recentId() {
    if (sessions_.empty()) return fresh();
    const Session& s = sessions_[sessions_.size() - 1 - rng_.below(std::min<size_t>(sessions_.size(), 8))];
    if (s.prompt.empty()) return fresh();
    return s.prompt[rng_.below(s.prompt.size())];
  }

  uint64_t sessionCount() const { return sessionCounter_; }

 private:
  struct Session {
    uint64_t key = 0;
    std::vector<uint64_t> prompt;
    std::vector<std::vector<uint64_t>> past;
  };

  std::vector<uint64_t> freshRun(uint32_t n) {
    std::vector<uint64_t> v;
    append(v, n);
    return v;
  }
  void append(std::vector<uint64_t>& v, uint32_t n) {
    for (uint32_t k = 0; k < n; ++k) v.push_back(fresh());
  }
  void remember(Session& s) {
    if (s.prompt.empty()) return;
    if (s.past.size() == 4) s.past.erase(s.past.begin() + static_cast<std::ptrdiff_t>(rng_.below(4)));
    s.past.push_back(s.prompt);
  }

  Request startSession() {
    Session s;
    s.key = ++sessionCounter_;
    const uint32_t length = chainLength(rng_);
    if (rng_.percent(50)) {
      const std::vector<uint64_t>& prefix = rng_.pick(shared_);
      const uint32_t take = std::min<uint32_t>(length, static_cast<uint32_t>(prefix.size()));
      s.prompt.assign(prefix.begin(), prefix.begin() + take);
    }
    append(s.prompt, length - static_cast<uint32_t>(s.prompt.size()));
    return push(std::move(s));
  }

  Request push(Session s) {
    if (sessions_.size() == 48) sessions_.erase(sessions_.begin());
    sessions_.push_back(std::move(s));
    return Request{sessions_.back().prompt, sessions_.back().key};
  }

  Rng& rng_;
  uint64_t salt_;
  uint64_t counter_ = 0;
  uint64_t sessionCounter_ = 0;
  std::vector<std::vector<uint64_t>> shared_;
  std::vector<Session> sessions_;
};

// Requests whose ids are not chained: a small pool of ids reused at any
// depth, duplicates inside one request, chained requests with ids swapped in.
class GarbageWorkload {
 public:
  GarbageWorkload(Rng& rng, uint64_t salt) : rng_(rng), chained_(rng, salt) {
    for (int k = 0; k < 48; ++k) pool_.push_back(rng_.percent(50) ? rng_.next() : static_cast<uint64_t>(k));
  }

  uint64_t poolId() { return rng_.pick(pool_); }
  uint64_t anyId() { return rng_.percent(60) ? poolId() : chained_.recentId(); }

  Request next() {
    const uint64_t r = rng_.below(100);
    Request req;
    if (r < 30) {
      const uint32_t n = rng_.percent(70) ? static_cast<uint32_t>(rng_.range(0, 40)) : nearStride(rng_, 0, 200);
      for (uint32_t k = 0; k < n; ++k) req.ids.push_back(poolId());
      req.session = rng_.below(8);
      return req;
    }
    req = chained_.next();
    if (r < 80 && !req.ids.empty()) {
      const uint32_t edits = static_cast<uint32_t>(rng_.range(1, 6));
      for (uint32_t e = 0; e < edits; ++e) {
        const size_t at = rng_.percent(40) ? std::min<size_t>(req.ids.size() - 1, nearStride(rng_, 0, 600))
                                           : rng_.below(req.ids.size());
        switch (rng_.below(3)) {
          case 0:
            req.ids[at] = poolId();
            break;
          case 1:
            req.ids[at] = req.ids[rng_.below(req.ids.size())];
            break;  // same id at two depths
          default:
            req.ids[at] = chained_.recentId();
            break;  // an id of another chain
        }
      }
    } else if (r < 90 && req.ids.size() > 2) {
      // Shift: drop or duplicate one block, so the rest sits one depth off.
      const size_t at = rng_.below(req.ids.size());
      if (rng_.percent(50)) {
        req.ids.erase(req.ids.begin() + static_cast<std::ptrdiff_t>(at));
      } else {
        req.ids.insert(req.ids.begin() + static_cast<std::ptrdiff_t>(at), req.ids[at]);
      }
    }
    return req;
  }

 private:
  Rng& rng_;
  Workload chained_;
  std::vector<uint64_t> pool_;
};

}  // namespace core_test
