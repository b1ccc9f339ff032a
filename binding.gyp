{
  "targets": [
    {
      "target_name": "kvroute",
      "sources": [
        "native/bindings/addon.cc",
        "native/bindings/js-layout.cc",
        "native/bindings/js-router.cc",
        "native/bindings/js-router-policy.cc",
        "native/bindings/js-router-fleet.cc",
        "native/bindings/js-router-costs.cc",
        "native/bindings/js-router-peers.cc",
        "native/bindings/js-router-route.cc",
        "native/bindings/js-router-stats.cc",
        "native/bindings/js-router-events.cc",
        "native/bindings/js-hash.cc",
        "native/bindings/js-memory.cc",
        "native/bindings/js-shm-feed.cc",
        "native/bindings/js-request-scan.cc",
        "native/bindings/js-prefix-trie.cc",
        "native/bindings/js-otlp-spans.cc",
        "native/util/xxhash64.cc",
        "native/hash/prompt-hash.cc",
        "native/util/robin-hood-map.cc",
        "native/core/block-index.cc",
        "native/core/match-many.cc",
        "native/core/session-table.cc",
        "native/core/hash-ring.cc",
        "native/hash/token-keys.cc",
        "native/core/event-index.cc",
        "native/core/offload.cc",
        "native/core/router.cc",
        "native/core/policies/policy-interface.cc",
        "native/core/policies/registry.cc",
        "native/core/policies/round-robin.cc",
        "native/core/policies/session-hash.cc",
        "native/core/policies/load-only.cc",
        "native/core/policies/lmetric.cc",
        "native/core/policies/sticky.cc",
        "native/core/policies/unified.cc",
        "native/core/policies/min-ttft.cc",
        "native/core/shared-core.cc",
        "native/core/route-call.cc",
        "native/feed/shm-feed.cc",
        "native/feed/bus-guard.cc",
        "native/scan/json-text.cc",
        "native/scan/json-bytes.cc",
        "native/scan/dom-text.cc",
        "native/scan/request-scan.cc",
        "native/trie/prefix-trie.cc",
        "native/otlp/request-rows.cc",
        "native/otlp/span-ops.cc"
      ],
      "dependencies": ["simdjson"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native",
        "<!(node -p \"require('path').relative('.', require('path').dirname(require.resolve('@nozbe/simdjson/package.json')))\")/src"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_CPP_EXCEPTIONS",
        "NODE_ADDON_API_CPP_EXCEPTIONS_ALL",
        "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED",
        "SIMDJSON_EXCEPTIONS=0"
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-O3", "-Wall", "-Wextra", "-ffp-contract=off"]
    },
    {
      "target_name": "simdjson",
      "type": "static_library",
      "sources": [
        "<!(node -p \"require('path').relative('.', require('path').dirname(require.resolve('@nozbe/simdjson/package.json')))\")/src/simdjson.cpp"
      ],
      "defines": ["SIMDJSON_EXCEPTIONS=0"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-O3", "-fPIC", "-w"]
    }
  ]
}
