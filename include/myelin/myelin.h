// Umbrella header: everything a Myelin program uses.
#pragma once

#include "myelin/async.h"
#include "myelin/class_ref.h"
#include "myelin/config.h"
#include "myelin/connection_info.h"
#include "myelin/control.h"
#include "myelin/endpoint.h"
#include "myelin/errors.h"
#include "myelin/latency_histogram.h"
#include "myelin/perf_timer.h"
#include "myelin/remote_caps.h"
#include "myelin/remote_thread.h"
#include "myelin/result.h"
#include "myelin/stats.h"
