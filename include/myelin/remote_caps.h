// remoteCaps: what the peer of the current endpoint understands, answered in
// O(1) from the tables negotiated at the handshake.
#pragma once

#include <string_view>

#include "myelin/endpoint.h"

namespace myelin::remoteCaps {

// Each query uses the current endpoint of this thread (see EndpointCtx) and
// throws NoEndpointOnStackError without one. Names are fully qualified
// without a leading "::", e.g. "shop::Cart".

/// The peer serves (or calls) the class.
bool hasClass(std::string_view cls);
/// The peer serves this method with a compatible return type and mode, so
/// calling it will not throw UndefinedRemoteMethodError.
bool hasMethod(std::string_view cls, std::string_view method);
/// The peer's version of the method has this parameter (same name and type).
bool hasMethodParam(std::string_view cls, std::string_view method, std::string_view param);
/// The peer's version of the method returns the same type as ours.
bool hasMethodReturn(std::string_view cls, std::string_view method);
bool hasStruct(std::string_view st);
/// The peer's struct has this field with the same type as ours.
bool hasStructField(std::string_view st, std::string_view field);
bool hasEnum(std::string_view en);

/// The same queries on an explicit endpoint.
bool hasClass(const Endpoint& ep, std::string_view cls);
bool hasMethod(const Endpoint& ep, std::string_view cls, std::string_view method);
bool hasMethodParam(const Endpoint& ep, std::string_view cls, std::string_view method, std::string_view param);
bool hasMethodReturn(const Endpoint& ep, std::string_view cls, std::string_view method);
bool hasStruct(const Endpoint& ep, std::string_view st);
bool hasStructField(const Endpoint& ep, std::string_view st, std::string_view field);
bool hasEnum(const Endpoint& ep, std::string_view en);

}  // namespace myelin::remoteCaps
