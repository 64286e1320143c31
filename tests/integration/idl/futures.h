// Remote futures for the integration tests (docs/async-and-errors.md §2):
// an image pipeline whose stages pass AsyncRef handles, so the image stays
// on the service, plus small values that complete late or fail.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fut {

struct Image {
  std::string name;
  std::vector<std::uint8_t> pixels;
  float sharpness = 0;
};

class Studio : public myelin::EndpointClass {
 public:
  /// An image of `bytes` pixels, pixel i = (i * 7 + name.size()) mod 256.
  static myelin::AsyncRef<Image> load(const std::string& name, std::int32_t bytes);
  /// Adds `amount` to the sharpness and flips the low bit of every pixel.
  static myelin::AsyncRef<Image> sharpen(myelin::AsyncRef<Image> img, float amount);
  /// Returns the image it was given (held again under a new name).
  static myelin::AsyncRef<Image> identity(const myelin::AsyncRef<Image>& img);
  /// A short summary: pixel sum (4 bytes), pixel count (4 bytes), quality,
  /// sharpness × 10.
  static myelin::Async<std::vector<std::uint8_t>> encode(const myelin::AsyncRef<Image>& img, std::int32_t quality);
  /// `v`, completed `ms` later by another thread.
  static myelin::AsyncRef<std::int64_t> later(std::int64_t v, std::int64_t ms);
  /// Tally::twice(v) of the caller, completed in that reply's callback.
  static myelin::AsyncRef<std::int64_t> viaClient(std::int64_t v);
  /// Throws "no value for <v>".
  static myelin::AsyncRef<std::int64_t> failing(std::int64_t v);
  static std::int64_t plus(myelin::AsyncRef<std::int64_t> a, myelin::AsyncRef<std::int64_t> b);
  /// Values the service holds for the calling connection.
  static std::int64_t valuesHeld();
};

}  // namespace fut
