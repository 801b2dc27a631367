-- A lease exists only while its job runs. Every way out of `running` (a
-- settle of any kind, a rescue) already clears `lease_expires_at`; now the
-- table holds it, as `jobs_running_has_lease` holds the converse.
--
-- The settle's fence relies on it: it checks the lease (token and expiry)
-- and not the status, so no plan of it can read `jobs_lease_idx` (partial on
-- `status = 'running'`). That index holds an entry for every claim's row
-- version until vacuum, and a planner working from statistics taken while
-- few jobs ran took it for a handful of rows: each settle of a few jobs read
-- every entry and the heap pages behind them (bench/levers.md, lever 15).
update leasehold.jobs set lease_expires_at = null where lease_expires_at is not null and status <> 'running';
alter table leasehold.jobs add constraint jobs_lease_only_while_running
  check (lease_expires_at is null or status = 'running');
