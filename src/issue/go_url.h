// URIs the way Go's net/url reads and writes them, because cert-manager's
// csi-driver parses uri-sans with url.ParseRequestURI and puts each URL's
// String() into the certificate request.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace certmount {

// `uri` as Go's url.ParseRequestURI(uri).String() gives it: the scheme lower
// case, the path, user info and host re-escaped as Go escapes them (e.g. a
// space in the path becomes %20), everything else as written. Accepted as Go
// accepts: an absolute URI ("spiffe://a/b"), an opaque one with a scheme
// ("urn:x"), an absolute path ("/path") or "*". INVALID_ARGUMENT, with Go's
// reason as the message, for the empty string, a relative reference ("x"),
// control characters, a bad %-escape, host or port, and for a result that is
// not ASCII (Go's x509 writes URIs as IA5String).
Result<std::string> GoRequestUri(std::string_view uri);

}  // namespace certmount
