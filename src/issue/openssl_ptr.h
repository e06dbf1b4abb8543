// Owning pointers for OpenSSL objects and the one way this project turns the
// OpenSSL error queue into a Status message. Internal to src/issue/: nothing
// outside this directory includes OpenSSL headers.
#pragma once

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace certmount {

// Calls the OpenSSL free function `Free` on destruction.
template <auto Free>
struct OpensslFree {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};

using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpensslFree<&EVP_PKEY_free>>;
using EvpPkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, OpensslFree<&EVP_PKEY_CTX_free>>;
using EvpMdPtr = std::unique_ptr<EVP_MD, OpensslFree<&EVP_MD_free>>;
using EvpMdCtxPtr = std::unique_ptr<EVP_MD_CTX, OpensslFree<&EVP_MD_CTX_free>>;
using X509Ptr = std::unique_ptr<X509, OpensslFree<&X509_free>>;
using X509ReqPtr = std::unique_ptr<X509_REQ, OpensslFree<&X509_REQ_free>>;
using X509NamePtr = std::unique_ptr<X509_NAME, OpensslFree<&X509_NAME_free>>;
using X509ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpensslFree<&X509_EXTENSION_free>>;
using X509StorePtr = std::unique_ptr<X509_STORE, OpensslFree<&X509_STORE_free>>;
using X509StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, OpensslFree<&X509_STORE_CTX_free>>;
using BioPtr = std::unique_ptr<BIO, OpensslFree<&BIO_free_all>>;
using Pkcs12Ptr = std::unique_ptr<PKCS12, OpensslFree<&PKCS12_free>>;
using Asn1IntegerPtr = std::unique_ptr<ASN1_INTEGER, OpensslFree<&ASN1_INTEGER_free>>;
using Asn1TimePtr = std::unique_ptr<ASN1_TIME, OpensslFree<&ASN1_TIME_free>>;
using Asn1BitStringPtr = std::unique_ptr<ASN1_BIT_STRING, OpensslFree<&ASN1_BIT_STRING_free>>;
using Asn1OctetStringPtr = std::unique_ptr<ASN1_OCTET_STRING, OpensslFree<&ASN1_OCTET_STRING_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpensslFree<&BN_free>>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, OpensslFree<&GENERAL_NAME_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpensslFree<&GENERAL_NAMES_free>>;
using BasicConstraintsPtr =
    std::unique_ptr<BASIC_CONSTRAINTS, OpensslFree<&BASIC_CONSTRAINTS_free>>;
using ExtendedKeyUsagePtr =
    std::unique_ptr<EXTENDED_KEY_USAGE, OpensslFree<&EXTENDED_KEY_USAGE_free>>;

// A STACK_OF(X509) that frees the certificates it holds.
struct X509StackFree {
  void operator()(STACK_OF(X509) * stack) const { sk_X509_pop_free(stack, X509_free); }
};
using X509StackPtr = std::unique_ptr<STACK_OF(X509), X509StackFree>;

// A STACK_OF(X509_EXTENSION) that frees the extensions it holds.
struct X509ExtensionStackFree {
  void operator()(STACK_OF(X509_EXTENSION) * stack) const {
    sk_X509_EXTENSION_pop_free(stack, X509_EXTENSION_free);
  }
};
using X509ExtensionStackPtr = std::unique_ptr<STACK_OF(X509_EXTENSION), X509ExtensionStackFree>;

// Empties this thread's OpenSSL error queue and returns its entries joined
// with "; " (empty when the queue was empty). Call it right after a failed
// OpenSSL call so that stale errors never leak into a later message.
inline std::string DrainOpensslErrors() {
  std::string joined;
  char buffer[256];
  while (unsigned long error = ERR_get_error()) {
    ERR_error_string_n(error, buffer, sizeof(buffer));
    if (!joined.empty()) joined += "; ";
    joined += buffer;
  }
  return joined;
}

// `what` followed by the drained OpenSSL errors, for Status messages.
inline std::string OpensslFailure(const std::string& what) {
  std::string errors = DrainOpensslErrors();
  return errors.empty() ? what : what + ": " + errors;
}

// A read-only memory BIO over `data`; valid while `data` is.
inline BioPtr MemoryBio(const void* data, size_t size) {
  return BioPtr(BIO_new_mem_buf(data, static_cast<int>(size)));
}

// The DER OpenSSL's `i2d` (i2d_X509, i2d_PKCS12, ...) writes for `object`;
// INTERNAL naming `what` when it cannot.
template <typename I2d, typename T>
Result<std::string> EncodeDer(I2d i2d, const T* object, const std::string& what) {
  unsigned char* der = nullptr;
  int length = i2d(object, &der);
  if (length <= 0) return Status::Internal(OpensslFailure("cannot encode " + what));
  std::string bytes(reinterpret_cast<const char*>(der), static_cast<size_t>(length));
  OPENSSL_free(der);
  return bytes;
}

// Everything written to a memory BIO, as a string.
inline std::string BioContents(BIO* bio) {
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  return size > 0 ? std::string(data, static_cast<size_t>(size)) : std::string();
}

}  // namespace certmount
