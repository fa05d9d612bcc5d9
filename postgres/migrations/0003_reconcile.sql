-- inbox schema on PostgreSQL, version 3: refused keys and expected jobs,
-- the columns and meanings of schema.sql's refusals and expectations (read
-- them for each column). Times are Unix milliseconds, as in events.

CREATE TABLE refusals (
  source           text   COLLATE "C" NOT NULL CHECK (source <> ''),
  key              text   COLLATE "C" NOT NULL,
  job_id           text   COLLATE "C",
  event            text,
  first_refused_at bigint NOT NULL,
  last_refused_at  bigint NOT NULL CHECK (last_refused_at >= first_refused_at),
  refusals         bigint NOT NULL CHECK (refusals >= 1),
  PRIMARY KEY (source, key)
);

CREATE TABLE expectations (
  source        text    COLLATE "C" NOT NULL DEFAULT 'sume' CHECK (source <> ''),
  job_id        text    COLLATE "C" NOT NULL,
  status_url    text,
  expected_at   bigint  NOT NULL,
  due_at        bigint  NOT NULL,
  state         text    NOT NULL CHECK (state IN ('waiting', 'done', 'closed')),
  reason        text    CHECK ((state = 'closed') = (reason IS NOT NULL)),
  settled_at    bigint,
  next_poll_at  bigint  NOT NULL,
  lease_owner   text,
  lease_until   bigint  CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  polls         bigint  NOT NULL DEFAULT 0 CHECK (polls >= 0),
  redeliveries  bigint  NOT NULL DEFAULT 0 CHECK (redeliveries >= 0),
  job_status    text,
  polled_at     bigint,
  last_error    text,
  PRIMARY KEY (source, job_id)
);
-- The poller's claim: the first waiting expectations that are due.
CREATE INDEX expectations_due ON expectations (state, next_poll_at);
