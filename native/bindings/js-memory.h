// js-memory — gives the C heap's free pages back to the system after a burst.
//
// Why: the proxy's request bodies live in ArrayBuffers that Node allocates with
// malloc. After a burst (a wave of large or compressed bodies), V8 frees them,
// but glibc keeps the freed pages inside its heaps (only the top of a heap is
// returned on free), so the process stays at its peak RSS. malloc_trim(0)
// returns every free page of every arena (madvise), whatever its position.
#pragma once

#include <napi.h>

namespace kvroute {

// trimHeap() -> Promise<boolean>: malloc_trim(0) on the threadpool (it walks and
// locks every arena, which can take milliseconds); true when memory was given
// back. Resolves false at once where the C library has no malloc_trim (not glibc).
Napi::Value JsTrimHeap(const Napi::CallbackInfo& info);

}  // namespace kvroute
