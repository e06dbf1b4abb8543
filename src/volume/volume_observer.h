// The seam between the publisher and whoever tracks mounted volumes (the
// renewal scheduler, src/renew/scheduler.h): the publisher tells it about
// volumes entering and leaving the mounted state, so it needs no polling of
// the database. Kept apart from publisher.h so an observer depends on this
// alone, not on the publisher's store, issuer and Env.
#pragma once

#include <string>

#include "state/volume_record.h"

namespace certmount {

class VolumeObserver {
 public:
  virtual ~VolumeObserver() = default;
  // `volume` was just published (its row committed as mounted), or its
  // certificate was issued again outside the schedule.
  virtual void OnMounted(const ScheduledVolume& volume) = 0;
  // Returns only once no issuance for the volume is running or will start.
  virtual void OnRemoved(const std::string& volume_id) = 0;
};

}  // namespace certmount
