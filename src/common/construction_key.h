// Lets a class whose objects must come from its own factory (Open, Create,
// LoadOrCreate, which can fail and so return Result<unique_ptr<T>>) keep the
// constructor public for std::make_unique while only T itself can call it:
// only T can make a ConstructionKey<T>.
#pragma once

namespace certmount {

template <typename T>
class ConstructionKey {
  friend T;
  ConstructionKey() = default;
};

}  // namespace certmount
