// Variable references in a value, found the way Go's os.Expand finds them.
// cert-manager's csi-driver expands its ${POD_NAME}-style variables with
// os.Expand, so the attribute parser and the size bounds read references by
// this one rule.
#pragma once

#include <string_view>
#include <vector>

namespace certmount {

// A run of literal text, or one variable reference by its name.
struct ExpandPiece {
  bool is_variable = false;
  std::string_view text;  // the literal text, or the variable's name
};

// `value` cut as os.Expand reads it: $NAME (letters, digits, '_') and
// ${NAME} are references; $$, $1, $*, ${#} and the like name one-character
// special variables; a '$' followed by nothing name-like, or ending the
// value, is literal text; "${" without '}' and "${}" are dropped. The pieces
// view `value`, in order.
std::vector<ExpandPiece> SplitForExpansion(std::string_view value);

}  // namespace certmount
