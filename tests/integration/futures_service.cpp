// The service side of the remote-future tests: fut::Studio loads, sharpens
// and encodes images that stay here, handed from stage to stage by
// AsyncRef, and makes small values that complete late or fail.
#include <chrono>
#include <stdexcept>
#include <thread>

#include "futures.h"
#include "futures_client.h"

namespace fut {

myelin::AsyncRef<Image> Studio::load(const std::string& name, std::int32_t bytes) {
  Image img{name, std::vector<std::uint8_t>(static_cast<std::size_t>(bytes)), 0};
  for (std::size_t i = 0; i < img.pixels.size(); ++i) {
    img.pixels[i] = static_cast<std::uint8_t>(i * 7 + name.size());
  }
  return img;
}

myelin::AsyncRef<Image> Studio::sharpen(myelin::AsyncRef<Image> img, float amount) {
  Image out = img.value();
  out.sharpness += amount;
  for (auto& p : out.pixels) p ^= 1;
  return out;
}

myelin::AsyncRef<Image> Studio::identity(const myelin::AsyncRef<Image>& img) { return img; }

myelin::Async<std::vector<std::uint8_t>> Studio::encode(const myelin::AsyncRef<Image>& img, std::int32_t quality) {
  const Image& in = img.value();
  std::uint32_t sum = 0;
  for (std::uint8_t p : in.pixels) sum += p;
  auto n = static_cast<std::uint32_t>(in.pixels.size());
  std::vector<std::uint8_t> out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(sum >> (8 * i)));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.push_back(static_cast<std::uint8_t>(quality));
  out.push_back(static_cast<std::uint8_t>(in.sharpness * 10.0f + 0.5f));
  return out;
}

myelin::AsyncRef<std::int64_t> Studio::later(std::int64_t v, std::int64_t ms) {
  myelin::Async<std::int64_t> out;
  std::thread([out, v, ms]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    out.setValue(v);
  }).detach();
  return out;
}

myelin::AsyncRef<std::int64_t> Studio::viaClient(std::int64_t v) {
  myelin::Async<std::int64_t> out;
  myelin::Async<std::int64_t> asked = Tally::twice(v);
  asked.then([asked, out]() mutable {
    if (asked.isSuccess()) {
      out.setValue(asked.value());
    } else {
      out.setError(asked.errorMessage());
    }
  });
  return out;
}

myelin::AsyncRef<std::int64_t> Studio::failing(std::int64_t v) {
  throw std::runtime_error("no value for " + std::to_string(v));
}

std::int64_t Studio::plus(myelin::AsyncRef<std::int64_t> a, myelin::AsyncRef<std::int64_t> b) {
  return a.value() + b.value();
}

std::int64_t Studio::valuesHeld() {
  return static_cast<std::int64_t>(myelin::EndpointCtx::current().getLocalStats().valuesHeld);
}

}  // namespace fut
