// Interface of the Myelin greeter example: the header both the service and
// the client compile. myelin-gen reads it to generate the stubs (client side)
// and the dispatch code (service side).
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace greeter {

struct Point {
  std::int32_t x = 0;
  std::int32_t y = 0;
  std::optional<std::string> label;
};

class Greeter : public myelin::EndpointClass {
 public:
  /// Returns "Hello, <name>!".
  static std::string hello(const std::string& name);
  /// Returns the centroid of `pts` (integer division), labelled "centroid";
  /// an empty list gives {0, 0} with no label.
  static myelin::Async<Point> locate(std::vector<Point> pts);
  /// Fire-and-forget: the service prints the line.
  static myelin::AsyncVoid log(const std::string& line);
};

}  // namespace greeter
