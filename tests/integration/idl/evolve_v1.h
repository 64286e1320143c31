// Version 1 of an evolving interface (see evolve_v2.h for what changed).
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>
#include <string>
#include <vector>

namespace evo {

struct Item {
  std::uint32_t id = 0;
  std::string name;
  double price = 0;  // removed in v2
  std::vector<std::string> tags;
};

class Shop : public myelin::EndpointClass {
 public:
  static Item roundTrip(const Item& item);
  static std::string describe(const Item& item, std::uint32_t qty);
  static std::uint32_t onlyInV1();  // removed in v2
  static std::uint32_t version();
};

}  // namespace evo
