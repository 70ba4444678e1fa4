#pragma once
// Everything an application needs: #include <sqlock/sqlock.hpp>

#include <sqlock/client.hpp>
#include <sqlock/errors.hpp>
#include <sqlock/events.hpp>
#include <sqlock/jobs.hpp>
#include <sqlock/lease.hpp>
#include <sqlock/multi_lease.hpp>
#include <sqlock/mutex.hpp>
#include <sqlock/shared_mutex.hpp>
#include <sqlock/options.hpp>
