// Registration of this program's schema and the descriptor codec.
#include "schema/local_schema.h"

#include "myelin/errors.h"

namespace myelin::detail {

namespace {

constexpr std::uint8_t kMagic[4] = {'M', 'Y', 'L', 'N'};
// 2: the HELLO ends with the side's limits.
constexpr std::uint64_t kProtocolVersion = 2;
constexpr std::string_view kMaxMessageSizeName = "maxMessageSize";
constexpr std::size_t kMaxName = 4096;
/// Mode-byte bit of an instance method (docs/objects.md §2).
constexpr std::uint8_t kInstanceModeBit = 0x80;

void encodeMethods(WireWriter& w, const std::vector<MethodInfo>& ms) {
  w.rawVarint(ms.size());
  for (const auto& m : ms) {
    w.rawString(m.name);
    w.rawByte(static_cast<std::uint8_t>(static_cast<std::uint8_t>(m.mode) | (m.instance ? kInstanceModeBit : 0)));
    w.rawString(m.returnSig);
    w.rawVarint(m.params.size());
    for (const auto& p : m.params) {
      w.rawString(p.name);
      w.rawString(p.sig);
    }
  }
}

std::size_t readCount(WireReader& r) {
  std::uint64_t n = r.rawVarint();
  // Every element takes at least one byte, so a count above the bytes left
  // is a lie; checking it first bounds what we allocate.
  if (n > r.remaining()) WireReader::fail("handshake descriptor: count larger than the message");
  return static_cast<std::size_t>(n);
}

std::string readName(WireReader& r) { return std::string(r.rawString(kMaxName)); }

std::vector<MethodInfo> decodeMethods(WireReader& r) {
  std::vector<MethodInfo> ms(readCount(r));
  for (auto& m : ms) {
    m.name = readName(r);
    std::uint8_t mode = r.rawByte();
    m.instance = (mode & kInstanceModeBit) != 0;
    mode &= static_cast<std::uint8_t>(~kInstanceModeBit);
    if (mode > static_cast<std::uint8_t>(CallMode::kAsyncRef)) {
      WireReader::fail("handshake descriptor: bad call mode");
    }
    m.mode = static_cast<CallMode>(mode);
    m.returnSig = readName(r);
    m.params.resize(readCount(r));
    for (auto& p : m.params) {
      p.name = readName(r);
      p.sig = readName(r);
    }
  }
  return ms;
}

}  // namespace

void SchemaDescriptor::encode(ByteBuffer& out, const HelloLimits& ours) const {
  WireWriter w(out);
  out.append(kMagic, 4);
  w.rawVarint(kProtocolVersion);
  w.rawVarint(structs.size());
  for (const auto& s : structs) {
    w.rawString(s.name);
    w.rawVarint(s.fields.size());
    for (const auto& f : s.fields) {
      w.rawString(f.name);
      w.rawString(f.sig);
    }
  }
  w.rawVarint(enums.size());
  for (const auto& e : enums) {
    w.rawString(e.name);
    w.rawVarint(e.values.size());
    for (const auto& [n, v] : e.values) {
      w.rawString(n);
      w.rawVarint(zigzag(v));
    }
  }
  w.rawVarint(classes.size());
  for (const auto& c : classes) {
    w.rawString(c.name);
    encodeMethods(w, c.implemented);
    encodeMethods(w, c.called);
  }
  w.rawVarint(ours.maxMessageSize ? 1 : 0);
  if (ours.maxMessageSize) {
    w.rawString(kMaxMessageSizeName);
    w.rawVarint(*ours.maxMessageSize);
  }
}

SchemaDescriptor SchemaDescriptor::decode(const std::uint8_t* p, std::size_t n) {
  WireReader r(p, n);
  for (std::uint8_t m : kMagic) {
    if (r.rawByte() != m) WireReader::fail("handshake: not a Myelin peer (bad magic)");
  }
  std::uint64_t version = r.rawVarint();
  if (version != kProtocolVersion) {
    WireReader::fail("handshake: unsupported protocol version " + std::to_string(version));
  }
  SchemaDescriptor d;
  d.structs.resize(readCount(r));
  for (auto& s : d.structs) {
    s.name = readName(r);
    s.fields.resize(readCount(r));
    for (auto& f : s.fields) {
      f.name = readName(r);
      f.sig = readName(r);
    }
  }
  d.enums.resize(readCount(r));
  for (auto& e : d.enums) {
    e.name = readName(r);
    e.values.resize(readCount(r));
    for (auto& [nm, v] : e.values) {
      nm = readName(r);
      v = unzigzag(r.rawVarint());
    }
  }
  d.classes.resize(readCount(r));
  for (auto& c : d.classes) {
    c.name = readName(r);
    c.implemented = decodeMethods(r);
    c.called = decodeMethods(r);
  }
  // Limits by name; one this side does not know is skipped.
  for (std::size_t left = readCount(r); left > 0; --left) {
    std::string_view name = r.rawString(kMaxName);
    std::uint64_t value = r.rawVarint();
    if (name == kMaxMessageSizeName) d.limits.maxMessageSize = value;
  }
  r.finish();
  return d;
}

LocalSchema& LocalSchema::instance() {
  static LocalSchema* s = new LocalSchema();  // never destroyed: used from static init and exit
  return *s;
}

int LocalSchema::addStruct(std::string name, std::vector<NamedSig> fields) {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < schema_.structs.size(); ++i) {
    if (schema_.structs[i].name == name) return static_cast<int>(i);
  }
  if (frozen_) throw InvalidConfigurationError("struct " + name + " registered after the first connection");
  schema_.structs.push_back({std::move(name), std::move(fields)});
  return static_cast<int>(schema_.structs.size() - 1);
}

void LocalSchema::addEnum(std::string name, std::vector<std::pair<std::string, std::int64_t>> values) {
  std::lock_guard lock(mu_);
  for (const auto& e : schema_.enums) {
    if (e.name == name) return;
  }
  if (frozen_) throw InvalidConfigurationError("enum " + name + " registered after the first connection");
  schema_.enums.push_back({std::move(name), std::move(values)});
}

int LocalSchema::addClass(std::string name, Role role, std::vector<MethodInfo> methods) {
  std::lock_guard lock(mu_);
  if (frozen_) throw InvalidConfigurationError("class " + name + " registered after the first connection");
  std::size_t ci = 0;
  while (ci < schema_.classes.size() && schema_.classes[ci].name != name) ++ci;
  if (ci == schema_.classes.size()) schema_.classes.push_back({name, {}, {}});
  ClassSchema& c = schema_.classes[ci];
  auto& list = role == Role::kImplements ? c.implemented : c.called;
  if (!list.empty()) {
    throw InvalidConfigurationError("class " + name + " registered twice in the same role");
  }
  list = std::move(methods);
  if (role == Role::kImplements) return 0;  // wire ids are assigned in frozen()
  int base = static_cast<int>(calledFlat_.size());
  for (std::size_t m = 0; m < list.size(); ++m) {
    calledFlat_.push_back({static_cast<std::uint32_t>(ci), static_cast<std::uint32_t>(m)});
  }
  return base;
}

std::int32_t LocalSchema::classIndex(const std::string& name) {
  std::lock_guard lock(mu_);
  for (std::size_t ci = 0; ci < schema_.classes.size(); ++ci) {
    if (schema_.classes[ci].name == name) return static_cast<std::int32_t>(ci);
  }
  return -1;
}

const SchemaDescriptor& LocalSchema::freeze() {
  std::lock_guard lock(mu_);
  if (!frozen_.load(std::memory_order_relaxed)) {
    // A method's wire id is its position among all implemented methods in
    // descriptor order, which the peer computes from our HELLO alone.
    for (std::size_t c = 0; c < schema_.classes.size(); ++c) {
      for (std::size_t m = 0; m < schema_.classes[c].implemented.size(); ++m) {
        implementedFlat_.push_back({static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(m)});
      }
    }
    frozen_.store(true, std::memory_order_release);
  }
  return schema_;
}

int registerStructInfo(std::string name, std::vector<NamedSig> fields) {
  return LocalSchema::instance().addStruct(std::move(name), std::move(fields));
}
void registerEnumInfo(std::string name, std::vector<std::pair<std::string, std::int64_t>> values) {
  LocalSchema::instance().addEnum(std::move(name), std::move(values));
}
int registerClassInfo(std::string name, Role role, std::vector<MethodInfo> methods) {
  return LocalSchema::instance().addClass(std::move(name), role, std::move(methods));
}

std::int32_t localClassIndex(const std::string& name) { return LocalSchema::instance().classIndex(name); }

}  // namespace myelin::detail
