// Service side of version 2 of the evolving interface.
#include <string>

#include "evolve_v2.h"

namespace evo {
Item Shop::roundTrip(const Item& item) { return item; }
std::string Shop::describe(const Item& item, bool gift, std::uint32_t qty) {
  return "v2:" + item.name + " x" + std::to_string(qty) + (gift ? " gift" : "") + " stock=" +
         std::to_string(item.stock) + " color=" + item.color;
}
std::uint32_t Shop::onlyInV2() { return 2; }
std::uint32_t Shop::version() { return 2; }
}  // namespace evo
