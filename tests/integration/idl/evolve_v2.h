// Version 2 of the evolving interface: Item lost `price`, gained `stock` and
// `color` and reordered its fields; describe() gained a parameter; a method
// was removed and one added.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>
#include <string>
#include <vector>

namespace evo {

struct Item {
  std::string name;
  std::uint64_t stock = 7;  // added
  std::uint32_t id = 0;
  std::vector<std::string> tags;
  std::string color = "red";  // added
};

class Shop : public myelin::EndpointClass {
 public:
  static std::uint32_t version();
  static Item roundTrip(const Item& item);
  static std::string describe(const Item& item, bool gift, std::uint32_t qty);
  static std::uint32_t onlyInV2();  // added
};

}  // namespace evo
