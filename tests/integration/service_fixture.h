// GoogleTest fixtures over a real service process: one process per test
// suite (the program MYELIN_TEST_SERVICE names), and for ServiceTest a fresh
// connection per test as the calling thread's endpoint.
#pragma once

#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <chrono>
#include <functional>
#include <thread>

#include "eventually.h"
#include "service_process.h"

namespace myelin_test {

class ServiceSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { service_ = new ServiceProcess(MYELIN_TEST_SERVICE); }
  static void TearDownTestSuite() {
    delete service_;
    service_ = nullptr;
  }
  static myelin::Endpoint connect() { return myelin::ConnectionInfo().setConnectAddress(service_->address()).connect(); }

  static inline ServiceProcess* service_ = nullptr;
};

class ServiceTest : public ServiceSuite {
 protected:
  void SetUp() override { ep_ = connect(); }
  void TearDown() override { ep_.disconnect(); }

  myelin::Endpoint ep_;
};

}  // namespace myelin_test
