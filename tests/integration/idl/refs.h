// Object references, the service's half of the interface: a guide session
// that a client opens with a reference to its listener, references as
// parameters, results and struct fields in both directions, and objects the
// service makes that live as long as the client refers to them.
#pragma once

#include <myelin/class_ref.h>
#include <myelin/endpoint.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "refs_client.h"

namespace refs {

/// Service-wide counts.
struct Counts {
  std::int64_t guidesMade = 0;
  std::int64_t guidesDestroyed = 0;
  std::int64_t listenersHeld = 0;  ///< references to clients' listeners the service holds
};

/// A listener and what it wants to hear about.
struct Subscription {
  myelin::ClassRef<Listener> listener;
  std::string topic;
};

/// Declares no constructor: a proxy of it is constructed on the service by
/// its first use, also when that use is being passed as a reference.
class Note : public myelin::EndpointClass {
 public:
  void set(const std::string& text);
  std::string text() const;

 private:
  std::string text_;
};

class Tour;
struct Tagged;
struct TourPlan;

class Guide : public myelin::EndpointClass {
 public:
  /// Logs `client` in: the guide keeps a reference to it.
  Guide(Listener& client, const std::string& city);
  explicit Guide(const std::string& city);
  /// Guide(city), made after `delayMs`.
  Guide(const std::string& city, std::int64_t delayMs);
  ~Guide();

  std::string city() const;
  /// Sends `count` points of interest to the logged-in listener from a
  /// service thread of its own, after this call has returned.
  void streamLater(std::int64_t count);
  /// streamLater, with the service's thread in a RemoteThread scope (`how`
  /// 1: the client runs the calls on a thread of its own for them) or a
  /// RemoteThreadPool scope of two threads (2: on its pool, side by side).
  void streamLaterIn(std::int64_t count, std::int64_t how);
  /// Calls `l.onValue(v)` during this call; returns what it returned.
  std::int64_t callBack(Listener& l, std::int64_t v);
  /// Keeps `l` for later calls.
  void hold(myelin::ClassRef<Listener> l);
  void subscribe(const Subscription& s);
  /// Calls onValue(v) on every listener held; returns the sum of the totals.
  std::int64_t callHeld(std::int64_t v);
  void dropHeld();
  myelin::ClassRef<Guide> self();
  bool isSelf(Guide& g);
  bool isSelfRef(const myelin::ClassRef<Guide>& g);
  /// isSelf, with `padding` bytes in the call.
  bool isSelfPadded(Guide& g, const std::string& padding);
  /// isSelf, with the reference after `padding` strings.
  bool isSelfAfter(const std::vector<std::string>& padding, Guide& g);
  /// This guide, with `size` bytes: sync, and as an Async made later on
  /// another thread.
  Tagged selfTagged(std::uint32_t size);
  myelin::Async<Tagged> selfTaggedLater(std::uint32_t size);
  /// The last listener held, taken out (the guide no longer holds it), as
  /// a subscription with a topic of `size` bytes.
  Subscription takeHeldTagged(std::uint32_t size);
  myelin::ClassRef<Listener> echo(myelin::ClassRef<Listener> l);
  /// echo(l), after `delayMs`.
  myelin::ClassRef<Listener> echoAfter(std::int64_t delayMs, myelin::ClassRef<Listener> l);
  myelin::Async<myelin::ClassRef<Listener>> echoLater(myelin::ClassRef<Listener> l);
  std::string readNote(Note& n);
  /// A tour of this guide's city (a class the client cannot stand in for).
  myelin::ClassRef<Tour> tour();
  /// A tour of this guide's city and, after it in the same value, a new
  /// guide of `city` that lives as long as it is referred to: sync, and as
  /// an Async.
  TourPlan plan(const std::string& city);
  myelin::Async<TourPlan> planLater(const std::string& city);

  /// A guide made on the service that lives as long as it is referred to.
  static myelin::ClassRef<Guide> open(const std::string& city);
  /// open(city), after `delayMs`.
  static myelin::ClassRef<Guide> openAfter(std::int64_t delayMs, const std::string& city);
  static Counts counts();

 private:
  std::string city_;
  myelin::ClassRef<Listener> client_;
  std::mutex mu_;
  std::vector<myelin::ClassRef<Listener>> held_;
  std::thread streamer_;
};

/// A reference to a guide and `tag` bytes with it.
struct Tagged {
  myelin::ClassRef<Guide> guide;
  std::string tag;
};

/// Every constructor takes a reference: a client cannot make a stand-in
/// for one, so it cannot receive references to it.
class Tour : public myelin::EndpointClass {
 public:
  explicit Tour(Guide& guide);
  std::string city() const;

 private:
  myelin::ClassRef<Guide> guide_;
};

/// A tour and a guide in one value.
struct TourPlan {
  myelin::ClassRef<Tour> tour;
  myelin::ClassRef<Guide> guide;
};

}  // namespace refs
