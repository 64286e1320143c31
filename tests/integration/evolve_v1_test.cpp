// A version-1 client against a version-2 service: common data arrives
// intact, the rest is default-initialised, the removed method is undefined,
// and remoteCaps tells which is which.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include "evolve_v1.h"
#include "evolve_v1_gen.h"
#include "service_process.h"

namespace {

TEST(EvolveV1ClientV2Service, CommonDataSurvivesAndTheRestIsDefault) {
  myelin_test::ServiceProcess service(MYELIN_TEST_SERVICE);
  auto ep = myelin::ConnectionInfo().setConnectAddress(service.address()).connect();
  EXPECT_EQ(evo::Shop::version(), 2u);

  evo::Item item{5, "apple", 9.5, {"red", "fresh"}};
  evo::Item back = evo::Shop::roundTrip(item);
  EXPECT_EQ(back.id, 5u);
  EXPECT_EQ(back.name, "apple");
  EXPECT_EQ(back.tags, (std::vector<std::string>{"red", "fresh"}));
  EXPECT_EQ(back.price, 0.0) << "v2 has no price: it comes back default";

  // v2 sees qty, its new `gift` parameter default (false), and its new
  // fields at their initialisers.
  EXPECT_EQ(evo::Shop::describe(item, 3), "v2:apple x3 stock=7 color=red");

  EXPECT_THROW(evo::Shop::onlyInV1(), myelin::UndefinedRemoteMethodError);
  EXPECT_TRUE(ep.isConnected()) << "calling an undefined method is a local error";

  using namespace myelin::remoteCaps;
  EXPECT_FALSE(hasMethod("evo::Shop", "onlyInV1"));
  EXPECT_TRUE(hasMethod("evo::Shop", "describe"));
  EXPECT_TRUE(hasMethodParam("evo::Shop", "describe", "qty"));
  EXPECT_FALSE(hasMethodParam("evo::Shop", "describe", "gift"));
  EXPECT_TRUE(hasStructField("evo::Item", "name"));
  EXPECT_FALSE(hasStructField("evo::Item", "price"));
  EXPECT_TRUE(hasMethodReturn("evo::Shop", "roundTrip"));
  EXPECT_FALSE((hasMethod<evo::Shop, &evo::Shop::onlyInV1>()));
  EXPECT_TRUE((hasMethod<evo::Shop, &evo::Shop::version>()));
  EXPECT_FALSE(hasStructField<&evo::Item::price>());
  EXPECT_TRUE(hasStructField<&evo::Item::tags>());
}

}  // namespace
