// bus-guard — keeps a feed mapping readable when its file shrinks under it.
//
// Why it exists: reading a mapped page past the end of its file raises
// SIGBUS, which kills the process. The reader re-checks the file's size at
// most every recheckMs (a stat, never per read), so a file truncated in place
// between two checks would otherwise be read past its end. Checking before
// every read would cost a system call per read and still leave a window.
//
// The scheme: guardMapping() registers a mapping; a process-wide SIGBUS
// handler (installed once, chaining to the previous one) finds the faulting
// address in a registered mapping and replaces that whole mapping, in place
// (mmap MAP_FIXED), with private zero pages, then returns, so the faulting
// load re-runs and reads zero. A zero slot reads as never published (sequence
// 0, timestamp 0): the router falls back on shadow state for it. The mapping
// stays replaced until its owner unmaps it; faulted() tells the owner, whose
// next refresh re-checks the file and reports its status (bad-size, missing).
//
// Alternatives weighed: pread() of each slot into a private buffer is correct
// but puts a system call on the hot path (per slot, per decision); an fstat
// before each read has a window between the check and the read. The
// handler costs nothing until a truncation happens.
//
// Invariants and hazards:
// - The handler touches only the registry (lock-free atomics) and makes one
//   mmap system call; errno is preserved. It takes no lock and allocates
//   nothing.
// - A fault outside every registered mapping goes to the previous SIGBUS
//   disposition (by default the process dies, as before).
// - An owner unregisters before it unmaps, so the handler never replaces a
//   range that another mapping may since occupy.
// - At most kMaxGuarded mappings at once; beyond that guardMapping() returns
//   -1 and the mapping is unguarded (as every mapping was before).
#pragma once

#include <cstddef>

namespace kvroute::shm {

constexpr int kMaxGuarded = 256;

// Registers [base, base + bytes); returns a token for unguardMapping(), or -1
// when the registry is full. `writable`: the zero pages that replace it are
// writable too (a writer's mapping), so its stores go nowhere instead of faulting.
int guardMapping(void* base, size_t bytes, bool writable = false);
// Unregisters (call before munmap). -1 is ignored.
void unguardMapping(int token);
// Whether the handler replaced the mapping with zero pages (its file shrank).
bool mappingFaulted(int token);

}  // namespace kvroute::shm
