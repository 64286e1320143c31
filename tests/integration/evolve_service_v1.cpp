// Service side of version 1 of the evolving interface.
#include <string>

#include "evolve_v1.h"

namespace evo {
Item Shop::roundTrip(const Item& item) { return item; }
std::string Shop::describe(const Item& item, std::uint32_t qty) {
  return "v1:" + item.name + " x" + std::to_string(qty) + " price=" + std::to_string(static_cast<int>(item.price));
}
std::uint32_t Shop::onlyInV1() { return 1; }
std::uint32_t Shop::version() { return 1; }
}  // namespace evo
