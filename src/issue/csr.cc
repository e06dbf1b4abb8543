#include "issue/csr.h"

#include <openssl/core_names.h>
#include <openssl/pem.h>
#include <strings.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "issue/dn.h"
#include "issue/openssl_ptr.h"

namespace certmount {
namespace {

struct AttributeName {
  const char* name;
  int nid;
};

// The names dn.h produces, mapped to OpenSSL's objects. Several spellings
// differ from OpenSSL's short names ("STREET" is "street" there).
constexpr AttributeName kAttributeNames[] = {
    {"CN", NID_commonName},
    {"O", NID_organizationName},
    {"OU", NID_organizationalUnitName},
    {"C", NID_countryName},
    {"ST", NID_stateOrProvinceName},
    {"L", NID_localityName},
    {"STREET", NID_streetAddress},
    {"postalCode", NID_postalCode},
    {"serialNumber", NID_serialNumber},
    {"DC", NID_domainComponent},
    {"UID", NID_userId},
};

Result<ASN1_OBJECT*> AttributeObject(const std::string& type) {
  for (const AttributeName& known : kAttributeNames) {
    if (strcasecmp(known.name, type.c_str()) == 0) return OBJ_nid2obj(known.nid);
  }
  // Anything else must be a dotted OID; names OpenSSL happens to know are not
  // accepted, to keep the set of spellings fixed.
  ASN1_OBJECT* object = OBJ_txt2obj(type.c_str(), /*no_name=*/1);
  if (object == nullptr) {
    DrainOpensslErrors();
    return Status::InvalidArgument("unknown subject attribute type '" + type + "'");
  }
  return object;
}

// Go's asn1 string choice, which cert-manager and csi-driver write names
// with: PrintableString when every character is in its set (without '*' and
// '&'), otherwise UTF8String.
int GoStringType(std::string_view value) {
  constexpr std::string_view kPrintablePunctuation = " '()+,-./:=?";
  const bool printable = std::all_of(value.begin(), value.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           kPrintablePunctuation.find(c) != std::string_view::npos;
  });
  return printable ? V_ASN1_PRINTABLESTRING : V_ASN1_UTF8STRING;
}

// Adds one attribute; `new_rdn` false joins it to the last RDN. The string
// type is given explicitly so that OpenSSL's string table (X.520 upper
// bounds such as 64 characters for a common name) is not applied: csi-driver
// applies none either.
Status AddEntry(X509_NAME* name, const std::string& type, const std::string& value, bool new_rdn) {
  if (!IsValidUtf8(value)) {
    return Status::InvalidArgument("subject attribute " + type + " is not UTF-8");
  }
  CERTMOUNT_ASSIGN_OR_RETURN(ASN1_OBJECT * object, AttributeObject(type));
  int ok = X509_NAME_add_entry_by_OBJ(name, object, GoStringType(value),
                                      reinterpret_cast<const unsigned char*>(value.data()),
                                      static_cast<int>(value.size()), -1, new_rdn ? 0 : -1);
  // OBJ_nid2obj objects are static and freeing them is a no-op; txt2obj ones
  // are ours.
  ASN1_OBJECT_free(object);
  if (ok != 1) {
    return Status::InvalidArgument(OpensslFailure("invalid subject attribute " + type));
  }
  return Status::Ok();
}

Result<X509NamePtr> LiteralSubjectName(const std::string& literal) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<RdnAttribute> attributes, ParseRfc4514(literal));
  // Group into RDNs, then emit them last-first: RFC 4514 writes the most
  // specific RDN first while the ASN.1 Name starts with the least specific.
  std::vector<std::vector<const RdnAttribute*>> rdns;
  for (const RdnAttribute& attribute : attributes) {
    if (!attribute.continues_rdn || rdns.empty()) rdns.emplace_back();
    rdns.back().push_back(&attribute);
  }
  X509NamePtr name(X509_NAME_new());
  if (name == nullptr) return Status::Internal(OpensslFailure("cannot allocate name"));
  for (auto rdn = rdns.rbegin(); rdn != rdns.rend(); ++rdn) {
    bool first = true;
    for (const RdnAttribute* attribute : *rdn) {
      CERTMOUNT_RETURN_IF_ERROR(AddEntry(name.get(), attribute->type, attribute->value, first));
      first = false;
    }
  }
  return name;
}

Result<X509NamePtr> StructuredSubjectName(const Subject& subject) {
  X509NamePtr name(X509_NAME_new());
  if (name == nullptr) return Status::Internal(OpensslFailure("cannot allocate name"));
  // The order Go's crypto/x509 (and so csi-driver) writes the fields in, the
  // values of one field as one multi-valued RDN as Go's pkix.Name does (DER
  // encoding sorts them, in OpenSSL as in Go).
  const std::pair<const char*, const std::vector<std::string>*> lists[] = {
      {"C", &subject.countries},
      {"ST", &subject.provinces},
      {"L", &subject.localities},
      {"STREET", &subject.street_addresses},
      {"postalCode", &subject.postal_codes},
      {"O", &subject.organizations},
      {"OU", &subject.organizational_units},
  };
  for (const auto& [type, values] : lists) {
    bool first = true;
    for (const std::string& value : *values) {
      CERTMOUNT_RETURN_IF_ERROR(AddEntry(name.get(), type, value, first));
      first = false;
    }
  }
  if (!subject.common_name.empty()) {
    CERTMOUNT_RETURN_IF_ERROR(AddEntry(name.get(), "CN", subject.common_name, true));
  }
  if (!subject.serial_number.empty()) {
    CERTMOUNT_RETURN_IF_ERROR(AddEntry(name.get(), "serialNumber", subject.serial_number, true));
  }
  return name;
}

Status AddStringName(GENERAL_NAMES* names, int type, const std::string& value) {
  GeneralNamePtr name(GENERAL_NAME_new());
  ASN1_IA5STRING* text = ASN1_IA5STRING_new();
  if (name == nullptr || text == nullptr ||
      ASN1_STRING_set(text, value.data(), static_cast<int>(value.size())) != 1) {
    ASN1_IA5STRING_free(text);
    return Status::Internal(OpensslFailure("cannot build subjectAltName"));
  }
  GENERAL_NAME_set0_value(name.get(), type, text);
  if (sk_GENERAL_NAME_push(names, name.get()) == 0) {
    return Status::Internal(OpensslFailure("cannot build subjectAltName"));
  }
  name.release();  // now owned by `names`
  return Status::Ok();
}

Status AddIpName(GENERAL_NAMES* names, const std::string& address) {
  // a2i_IPADDRESS parses both dotted IPv4 and every IPv6 text form.
  Asn1OctetStringPtr octets(a2i_IPADDRESS(address.c_str()));
  if (octets == nullptr) {
    DrainOpensslErrors();
    return Status::InvalidArgument("invalid IP address '" + address + "'");
  }
  GeneralNamePtr name(GENERAL_NAME_new());
  if (name == nullptr) return Status::Internal(OpensslFailure("cannot build subjectAltName"));
  GENERAL_NAME_set0_value(name.get(), GEN_IPADD, octets.release());
  if (sk_GENERAL_NAME_push(names, name.get()) == 0) {
    return Status::Internal(OpensslFailure("cannot build subjectAltName"));
  }
  name.release();
  return Status::Ok();
}

Result<GeneralNamesPtr> SubjectAltNames(const CertificateSpec& spec) {
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (names == nullptr) return Status::Internal(OpensslFailure("cannot allocate names"));
  for (const std::string& dns : spec.dns_names) {
    CERTMOUNT_RETURN_IF_ERROR(AddStringName(names.get(), GEN_DNS, dns));
  }
  for (const std::string& ip : spec.ip_addresses) {
    CERTMOUNT_RETURN_IF_ERROR(AddIpName(names.get(), ip));
  }
  for (const std::string& uri : spec.uris) {
    CERTMOUNT_RETURN_IF_ERROR(AddStringName(names.get(), GEN_URI, uri));
  }
  for (const std::string& email : spec.email_addresses) {
    CERTMOUNT_RETURN_IF_ERROR(AddStringName(names.get(), GEN_EMAIL, email));
  }
  return names;
}

// Encodes `key`'s SubjectPublicKeyInfo into the request. OpenSSL 3's
// X509_REQ_set_pubkey runs the generic encoder machinery, which costs ~10x an
// ECDSA signature, so EC and Ed25519 keys get their two fields set directly;
// RSA (whose keygen dwarfs this anyway) takes the generic path.
Status SetRequestPublicKey(X509_REQ* request, const PrivateKey& key) {
  X509_PUBKEY* info = X509_REQ_get_X509_PUBKEY(request);
  unsigned char buffer[256];  // fits an uncompressed P-521 point (133 bytes)
  size_t length = 0;
  if (key.algorithm() == KeyAlgorithm::kEcdsa) {
    const int curve = key.key_size() == 256   ? NID_X9_62_prime256v1
                      : key.key_size() == 384 ? NID_secp384r1
                                              : NID_secp521r1;
    if (EVP_PKEY_get_octet_string_param(key.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, buffer,
                                        sizeof(buffer), &length) == 1) {
      unsigned char* point = static_cast<unsigned char*>(OPENSSL_memdup(buffer, length));
      if (point != nullptr &&
          X509_PUBKEY_set0_param(info, OBJ_nid2obj(NID_X9_62_id_ecPublicKey), V_ASN1_OBJECT,
                                 OBJ_nid2obj(curve), point, static_cast<int>(length)) == 1) {
        return Status::Ok();
      }
      OPENSSL_free(point);
    }
  } else if (key.algorithm() == KeyAlgorithm::kEd25519) {
    length = sizeof(buffer);
    if (EVP_PKEY_get_raw_public_key(key.get(), buffer, &length) == 1) {
      unsigned char* raw = static_cast<unsigned char*>(OPENSSL_memdup(buffer, length));
      if (raw != nullptr && X509_PUBKEY_set0_param(info, OBJ_nid2obj(NID_ED25519), V_ASN1_UNDEF,
                                                   nullptr, raw, static_cast<int>(length)) == 1) {
        return Status::Ok();
      }
      OPENSSL_free(raw);
    }
  }
  DrainOpensslErrors();
  if (X509_REQ_set_pubkey(request, key.get()) != 1) {
    return Status::Internal(OpensslFailure("cannot set request public key"));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> BuildCsrPem(const PrivateKey& key, const CertificateSpec& spec) {
  X509NamePtr subject;
  if (!spec.literal_subject.empty()) {
    CERTMOUNT_ASSIGN_OR_RETURN(subject, LiteralSubjectName(spec.literal_subject));
  } else {
    CERTMOUNT_ASSIGN_OR_RETURN(subject, StructuredSubjectName(spec.subject));
  }
  CERTMOUNT_ASSIGN_OR_RETURN(GeneralNamesPtr alt_names, SubjectAltNames(spec));
  // A request with neither a subject nor a SAN is allowed: csi-driver sends
  // one when a pod names no identity, and the issuer decides.
  const bool empty_subject = X509_NAME_entry_count(subject.get()) == 0;
  const bool no_alt_names = sk_GENERAL_NAME_num(alt_names.get()) == 0;

  X509ReqPtr request(X509_REQ_new());
  if (request == nullptr || X509_REQ_set_version(request.get(), X509_REQ_VERSION_1) != 1 ||
      X509_REQ_set_subject_name(request.get(), subject.get()) != 1) {
    return Status::Internal(OpensslFailure("cannot build certificate request"));
  }
  CERTMOUNT_RETURN_IF_ERROR(SetRequestPublicKey(request.get(), key));
  if (!no_alt_names) {
    X509ExtensionStackPtr extensions(sk_X509_EXTENSION_new_null());
    X509ExtensionPtr san(
        X509V3_EXT_i2d(NID_subject_alt_name, empty_subject ? 1 : 0, alt_names.get()));
    if (extensions == nullptr || san == nullptr ||
        sk_X509_EXTENSION_push(extensions.get(), san.get()) == 0) {
      return Status::Internal(OpensslFailure("cannot build subjectAltName extension"));
    }
    san.release();  // owned by `extensions`
    if (X509_REQ_add_extensions(request.get(), extensions.get()) != 1) {
      return Status::Internal(OpensslFailure("cannot add extension request"));
    }
  }
  if (X509_REQ_sign(request.get(), key.get(), key.SigningDigest()) <= 0) {
    return Status::Internal(OpensslFailure("cannot sign certificate request"));
  }
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509_REQ(bio.get(), request.get()) != 1) {
    return Status::Internal(OpensslFailure("cannot encode certificate request"));
  }
  return BioContents(bio.get());
}

}  // namespace certmount
