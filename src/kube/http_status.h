// Kubernetes API answers as Status values: one mapping for every request the
// client makes, with the API server's own message carried along.
#pragma once

#include <string>

#include "common/status.h"

namespace certmount::kube {

// The Status for a non-2xx answer. 401/403 PERMISSION_DENIED, 404 NOT_FOUND,
// 409 ALREADY_EXISTS, 410 ABORTED (see IsGone), 400/422 INVALID_ARGUMENT,
// 429 RESOURCE_EXHAUSTED, 5xx UNAVAILABLE, anything else INTERNAL. The
// message is "API server answered <code> <reason>: <message>" from the
// body's metav1.Status, or the start of the body when it is not one.
Status StatusFromHttp(long http_status, const std::string& body);

// True for the Status of a 410 Gone (HTTP or a watch ERROR event with code
// 410): the resourceVersion asked for is too old and the caller must list
// again. Within this layer ABORTED means exactly that.
bool IsGone(const Status& status);

// Whether an answer with this HTTP status is worth retrying (429, 5xx).
bool IsRetryableHttp(long http_status);

}  // namespace certmount::kube
