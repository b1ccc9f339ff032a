// replay-main — runs a fuzz target over files, without libFuzzer.
//
// Why it exists: every input a fuzzer found must stay a regression case that
// `npm test` replays, on machines without clang. This main() links to one
// target's LLVMFuzzerTestOneInput (built with g++ and the sanitizers by
// scripts/fuzz-replay.sh) and feeds it each file named on the command line, or
// each file inside a directory named there. A broken invariant or a sanitizer
// report aborts; otherwise it prints how many inputs passed.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool isDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The regular files of `dir`, sorted so a run's order is stable.
std::vector<std::string> filesIn(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return files;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == ".." || name[0] == '.') continue;
    const std::string path = dir + "/" + name;
    if (!isDirectory(path)) files.push_back(path);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (isDirectory(argv[i])) {
      const std::vector<std::string> inside = filesIn(argv[i]);
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      files.emplace_back(argv[i]);
    }
  }
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      return 2;
    }
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A file of zero bytes still runs (the empty input is a case too), with a
    // valid pointer as libFuzzer passes one.
    static const uint8_t kNothing = 0;
    LLVMFuzzerTestOneInput(bytes.empty() ? &kNothing : bytes.data(), bytes.size());
  }
  std::printf("%s: %zu inputs replayed, no finding\n", argc > 0 ? argv[0] : "replay", files.size());
  return 0;
}
