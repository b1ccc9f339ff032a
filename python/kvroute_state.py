#!/usr/bin/env python3
"""Publish an engine's live state into kvroute's shared-memory feed (stdlib only).

The layout is docs/shm-layout.md (version 1): a 64-byte header, then one 128-byte slot per
engine, each guarded by a seqlock sequence. kvroute's router maps the same file and reads it
without locks.

Library use, from an engine-side hook that runs every scheduler step::

    from kvroute_state import StateFeed
    feed = StateFeed("/dev/shm/kvroute-state", slots=8)   # joins the file, or creates it
    feed.publish(3, "engine-3", running=5, waiting=2, kv_blocks_used=9000,
                 kv_blocks_total=20194, pending_prefill_tokens=12000,
                 max_prefill_remaining=8000, decode_batch=4)

Where a vLLM stat-logger plugin would call it: vLLM V1 hands every stat logger a
``SchedulerStats`` after each engine step (``num_running_reqs``, ``num_waiting_reqs``,
``kv_cache_usage``, ``prefix_cache_stats``)::

    from vllm.v1.metrics.loggers import StatLoggerBase

    class KvrouteStateLogger(StatLoggerBase):
        def __init__(self, vllm_config, engine_index=0):
            self.slot = engine_index
            self.feed = StateFeed("/dev/shm/kvroute-state", slots=8)
            self.total = vllm_config.cache_config.num_gpu_blocks or 0
        def record(self, scheduler_stats, iteration_stats, engine_idx=0):
            if scheduler_stats is None:
                return
            s = scheduler_stats
            self.feed.publish(self.slot, f"engine-{self.slot}",
                              running=s.num_running_reqs, waiting=s.num_waiting_reqs,
                              kv_blocks_used=round(s.kv_cache_usage * self.total),
                              kv_blocks_total=self.total,
                              pending_prefill_tokens=0, max_prefill_remaining=0,
                              decode_batch=s.num_running_reqs)
        def log_engine_initialized(self):
            pass

(Pending prefill tokens are not in vLLM's stats; a scheduler hook that sees the request
queue can fill them in.)

Script use, one snapshot::

    python3 python/kvroute_state.py --shm NAME --slots N --instance I --running R \\
        --waiting W --kv-used U --kv-total T --pending-prefill P \\
        --max-prefill-remaining M --decode-batch D

Ordering: the writer marks the slot busy (odd sequence), writes the fields, then marks it
done (even sequence), each a store into the mapping in program order. That order is what
x86-64 (total store order) guarantees; on a weakly ordered CPU (arm64) use kvroute's addon
writer instead. One writer per slot.
"""

import argparse
import mmap
import os
import random
import struct
import sys
import time

MAGIC = b"KVRSTATE"
VERSION = 1
HEADER_BYTES = 64
SLOT_BYTES = 128
INSTANCE_BYTES = 48
MAX_SLOTS = 1 << 16
FLAG_UNREACHABLE = 1

# Slot fields after the sequence (offset 8): timestamp_ns, running, waiting, kv_blocks_used,
# kv_blocks_total, pending_prefill_tokens, max_prefill_remaining, decode_batch, flags,
# prefix_cache_queries, prefix_cache_hits, instance.
_FIELDS = struct.Struct("<qIIQQQQIIQQ48s")
_SEQ = struct.Struct("<Q")
_HEADER = struct.Struct("<8sIII4xQ32x")

_U32 = (1 << 32) - 1
_U64 = (1 << 53) - 1


def feed_path(name):
    """/dev/shm/NAME for a bare name; a path as is."""
    if "/" in name:
        return name
    return os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp", name)


class StateFeed:
    """A writable mapping of the feed at `path` with `slots` slots."""

    def __init__(self, path, slots, recreate=False):
        if not (isinstance(slots, int) and 1 <= slots <= MAX_SLOTS):
            raise ValueError(f"slots must be an integer in [1, {MAX_SLOTS}], got {slots!r}")
        self.path = feed_path(path)
        self.slots = slots
        size = HEADER_BYTES + slots * SLOT_BYTES
        if recreate or not self._joinable(size):
            self._create(size)
        fd = os.open(self.path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.generation = _HEADER.unpack_from(self._map, 0)[4]

    def _joinable(self, size):
        try:
            with open(self.path, "rb") as f:
                header = f.read(HEADER_BYTES)
                f.seek(0, os.SEEK_END)
                actual = f.tell()
        except OSError:
            return False
        if len(header) < HEADER_BYTES or actual != size:
            return False
        magic, version, count, slot_size, _generation = _HEADER.unpack(header)
        return magic == MAGIC and version == VERSION and count == self.slots and slot_size == SLOT_BYTES

    def _create(self, size):
        generation = random.getrandbits(64) or 1
        temp = f"{self.path}.tmp-{os.getpid()}-{generation & 0xFFFF}"
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, size)
            os.pwrite(fd, _HEADER.pack(MAGIC, VERSION, self.slots, SLOT_BYTES, generation), 0)
        finally:
            os.close(fd)
        os.rename(temp, self.path)  # readers never see a half-written header

    def publish(self, slot, instance, *, running, waiting, kv_blocks_used, kv_blocks_total,
                pending_prefill_tokens, max_prefill_remaining, decode_batch,
                prefix_cache_queries=0, prefix_cache_hits=0, unreachable=False, timestamp_ns=None):
        """Writes one slot; every count must be a non-negative integer."""
        if not (isinstance(slot, int) and 0 <= slot < self.slots):
            raise ValueError(f"slot must be an integer in [0, {self.slots - 1}], got {slot!r}")
        counts = {
            "running": (running, _U32), "waiting": (waiting, _U32),
            "kv_blocks_used": (kv_blocks_used, _U64), "kv_blocks_total": (kv_blocks_total, _U64),
            "pending_prefill_tokens": (pending_prefill_tokens, _U64),
            "max_prefill_remaining": (max_prefill_remaining, _U64),
            "decode_batch": (decode_batch, _U32),
            "prefix_cache_queries": (prefix_cache_queries, _U64),
            "prefix_cache_hits": (prefix_cache_hits, _U64),
        }
        for name, (value, limit) in counts.items():
            if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit):
                raise ValueError(f"{name} must be an integer in [0, {limit}], got {value!r}")
        ident = instance.encode("utf-8")[: INSTANCE_BYTES - 1]
        stamp = time.time_ns() if timestamp_ns is None else timestamp_ns
        at = HEADER_BYTES + slot * SLOT_BYTES
        (seq,) = _SEQ.unpack_from(self._map, at)
        start = (seq + 1) & ~1  # even, and not below what is there
        _SEQ.pack_into(self._map, at, start + 1)  # busy
        _FIELDS.pack_into(self._map, at + 8, stamp, running, waiting, kv_blocks_used, kv_blocks_total,
                          pending_prefill_tokens, max_prefill_remaining, decode_batch,
                          FLAG_UNREACHABLE if unreachable else 0, prefix_cache_queries,
                          prefix_cache_hits, ident)
        _SEQ.pack_into(self._map, at, start + 2)  # done

    def close(self):
        self._map.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description="Publish one engine-state snapshot into kvroute's feed.")
    parser.add_argument("--shm", required=True, help="feed name under /dev/shm, or a path")
    parser.add_argument("--slots", type=int, required=True, help="slots in the feed (engines)")
    parser.add_argument("--instance", type=int, required=True, help="this engine's slot")
    parser.add_argument("--id", help="instance id written into the slot (default engine-I)")
    for flag in ("running", "waiting", "kv-used", "kv-total", "pending-prefill",
                 "max-prefill-remaining", "decode-batch"):
        parser.add_argument(f"--{flag}", type=int, required=True)
    parser.add_argument("--prefix-queries", type=int, default=0)
    parser.add_argument("--prefix-hits", type=int, default=0)
    parser.add_argument("--unreachable", action="store_true")
    args = parser.parse_args(argv)
    try:
        feed = StateFeed(args.shm, args.slots)
        feed.publish(args.instance, args.id or f"engine-{args.instance}", running=args.running,
                     waiting=args.waiting, kv_blocks_used=args.kv_used, kv_blocks_total=args.kv_total,
                     pending_prefill_tokens=args.pending_prefill,
                     max_prefill_remaining=args.max_prefill_remaining, decode_batch=args.decode_batch,
                     prefix_cache_queries=args.prefix_queries, prefix_cache_hits=args.prefix_hits,
                     unreachable=args.unreachable)
        feed.close()
    except (ValueError, OSError) as error:
        print(f"kvroute_state: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
