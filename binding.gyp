{
  "targets": [
    {
      "target_name": "kvroute",
      "sources": [
        "native/addon.cc",
        "native/js-router.cc",
        "native/js-hash.cc",
        "native/js-shm-feed.cc",
        "native/js-request-scan.cc",
        "native/js-prefix-trie.cc",
        "native/xxhash64.cc",
        "native/prompt-hash.cc",
        "native/robin-hood-map.cc",
        "native/block-index.cc",
        "native/match-many.cc",
        "native/session-table.cc",
        "native/hash-ring.cc",
        "native/token-keys.cc",
        "native/event-index.cc",
        "native/offload.cc",
        "native/router.cc",
        "native/shared-core.cc",
        "native/shm-feed.cc",
        "native/json-text.cc",
        "native/json-bytes.cc",
        "native/dom-text.cc",
        "native/request-scan.cc",
        "native/prefix-trie.cc"
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
