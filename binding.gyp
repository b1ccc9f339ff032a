{
  "targets": [
    {
      "target_name": "kvroute",
      "sources": [
        "native/addon.cc",
        "native/js-router.cc",
        "native/js-hash.cc",
        "native/js-shm-feed.cc",
        "native/xxhash64.cc",
        "native/prompt-hash.cc",
        "native/robin-hood-map.cc",
        "native/block-index.cc",
        "native/match-many.cc",
        "native/session-table.cc",
        "native/hash-ring.cc",
        "native/router.cc",
        "native/shm-feed.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "native"],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_CPP_EXCEPTIONS",
        "NODE_ADDON_API_CPP_EXCEPTIONS_ALL",
        "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED"
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-O3", "-Wall", "-Wextra", "-ffp-contract=off"]
    }
  ]
}
