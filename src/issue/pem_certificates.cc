#include "issue/pem_certificates.h"

#include <openssl/pem.h>

#include <string>

#include "issue/openssl_ptr.h"

namespace certmount {

Status AppendPemCertificates(std::string_view pem, STACK_OF(X509) * stack, const char* what) {
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  if (bio == nullptr) return Status::Internal(OpensslFailure("cannot allocate BIO"));
  int count = 0;
  while (true) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    if (sk_X509_push(stack, cert.get()) == 0) {
      return Status::Internal(OpensslFailure("out of memory"));
    }
    cert.release();  // owned by `stack`
    ++count;
  }
  // The loop ends with a "no start line" error at end of input; only a
  // failure before any certificate matters.
  std::string errors = DrainOpensslErrors();
  if (count == 0) {
    return Status::InvalidArgument(std::string("no PEM certificate in ") + what +
                                   (errors.empty() ? "" : ": " + errors));
  }
  return Status::Ok();
}

}  // namespace certmount
