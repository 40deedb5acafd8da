// A user program built against the installed tree: allocates pinned memory, checks it.
#include <cstdio>
#include <vector>

#include <tether/pool.hpp>

int main() {
  std::vector<int, tether::pinned_allocator<int>> values(1000);
  for (int i = 0; i < 1000; ++i) values[i] = i;
  long sum = 0;
  for (int v : values) sum += v;
  tether::PoolLocation location;
  bool pinned = tether::pool_find(values.data(), location);
  std::printf("consumer: sum %ld, pinned %s\n", sum, pinned ? "yes" : "no");
  return sum == 499500 && pinned ? 0 : 1;
}
