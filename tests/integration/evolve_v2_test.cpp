// A version-2 client against a version-1 service: the mirror image of
// evolve_v1_test.cpp.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include "evolve_v2.h"
#include "service_process.h"

namespace {

TEST(EvolveV2ClientV1Service, CommonDataSurvivesAndTheRestIsDefault) {
  myelin_test::ServiceProcess service(MYELIN_TEST_SERVICE);
  auto ep = myelin::ConnectionInfo().setConnectAddress(service.address()).connect();
  EXPECT_EQ(evo::Shop::version(), 1u);

  evo::Item item;
  item.name = "pear";
  item.stock = 3;
  item.id = 9;
  item.tags = {"x"};
  item.color = "blue";
  evo::Item back = evo::Shop::roundTrip(item);
  EXPECT_EQ(back.name, "pear");
  EXPECT_EQ(back.id, 9u);
  EXPECT_EQ(back.tags, std::vector<std::string>{"x"});
  EXPECT_EQ(back.stock, 7u) << "v1 has no stock: our initialiser applies";
  EXPECT_EQ(back.color, "red");

  // v1 has no `gift` parameter: it is skipped; v1's `price` is default.
  EXPECT_EQ(evo::Shop::describe(item, true, 4), "v1:pear x4 price=0");

  EXPECT_THROW(evo::Shop::onlyInV2(), myelin::UndefinedRemoteMethodError);
  EXPECT_TRUE(ep.isConnected());

  using namespace myelin::remoteCaps;
  EXPECT_FALSE(hasMethod("evo::Shop", "onlyInV2"));
  EXPECT_TRUE(hasMethod("evo::Shop", "version"));
  EXPECT_FALSE(hasMethodParam("evo::Shop", "describe", "gift"));
  EXPECT_TRUE(hasMethodParam("evo::Shop", "describe", "qty"));
  EXPECT_FALSE(hasStructField("evo::Item", "stock"));
  EXPECT_FALSE(hasStructField("evo::Item", "color"));
  EXPECT_TRUE(hasStructField("evo::Item", "tags"));
}

}  // namespace
