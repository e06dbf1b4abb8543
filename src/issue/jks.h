// Java KeyStores (JKS, the JDK's "JKS" type: magic 0xFEEDFEED, version 2)
// for JVM applications that read only that format. Written from the format's
// public description; read back by the JDK's keytool in test/jks_test.cc.
//
// Aliases are cert-manager's (its Certificate's keystores.jks): the key entry
// is "certificate"; the CA certificates of ca.crt are trusted-certificate
// entries "ca", "ca-1", "ca-2", ..., in the keystore as in the truststore.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "issue/private_key.h"

namespace certmount {

// Bounds on what a keystore may hold; more is INVALID_ARGUMENT.
inline constexpr size_t kJksMaxChainCertificates = 32;
inline constexpr size_t kJksMaxCaCertificates = 1000;
inline constexpr size_t kJksMaxCertificateBytes = 64 * 1024;
inline constexpr size_t kJksMaxPasswordBytes = 16 * 1024;

// A JKS keystore holding one PrivateKeyEntry "certificate": `key` as PKCS#8,
// protected with `password` by the JDK's key protector (SHA-1 keystream,
// 20-byte random salt, SHA-1 check value), with the certificates of
// `chain_pem` (leaf first, then its issuers) as its chain; then a
// TrustedCertificateEntry per distinct certificate of `ca_pem` (which may be
// empty). The store's integrity digest uses `password` too; the password is
// UTF-8 and is used as the JDK uses a Java String (UTF-16). Every entry is
// dated `created_unix_ms` (milliseconds since the epoch).
// INVALID_ARGUMENT when the password is empty, not UTF-8 or too long, the
// chain is empty or does not parse, the key does not match the leaf, or a
// bound above is exceeded.
Result<std::string> BuildJksKeystore(const PrivateKey& key, std::string_view chain_pem,
                                     std::string_view ca_pem, std::string_view password,
                                     int64_t created_unix_ms);

// A JKS truststore: a TrustedCertificateEntry per distinct certificate of
// `ca_pem` ("ca", "ca-1", ...), no entry when `ca_pem` is empty. Same password
// rules, dates and bounds as BuildJksKeystore.
Result<std::string> BuildJksTruststore(std::string_view ca_pem, std::string_view password,
                                       int64_t created_unix_ms);

}  // namespace certmount
