// The service side of the symmetric-peer tests: sym::Peer is implemented by
// sym_peer.cpp, shared with the client; this names the side.
namespace sym {
extern const char* const kSide;
const char* const kSide = "service";
}  // namespace sym
