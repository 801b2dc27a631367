-- Runner invocations, live or on their way: the scheduler's view of how many
-- runners are already draining each queue. The scheduler inserts a row when
-- it invokes a runner; the runner renews it when it starts and deletes it
-- when it exits. A row whose runner died just expires.
create table leasehold.runners (
  id          text primary key,
  runner      text not null,
  request_id  text,
  started_at  timestamptz,
  expires_at  timestamptz not null
);

create index runners_live_idx on leasehold.runners (runner, expires_at);
