-- The spend ledger schema orch created before schema migrations (issue 19): commit ec60d76.
-- tests/test_ledger_migrations.py upgrades a ledger made from it.
CREATE TABLE spend (
	id INTEGER NOT NULL, 
	ts DATETIME NOT NULL, 
	wave_id VARCHAR NOT NULL, 
	leg_id VARCHAR NOT NULL, 
	kind VARCHAR NOT NULL, 
	model VARCHAR NOT NULL, 
	provider VARCHAR NOT NULL, 
	status VARCHAR NOT NULL, 
	reason TEXT, 
	finish_reason VARCHAR, 
	input_tokens INTEGER NOT NULL, 
	output_tokens INTEGER NOT NULL, 
	reasoning_tokens INTEGER NOT NULL, 
	cached_tokens INTEGER NOT NULL, 
	cost_usd FLOAT, 
	cost_source VARCHAR NOT NULL, 
	duration_s FLOAT NOT NULL, 
	tag VARCHAR, 
	project_dir TEXT, 
	run_id VARCHAR, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_spend_ts ON spend (ts);
CREATE INDEX ix_spend_run_id ON spend (run_id);
CREATE INDEX ix_spend_wave_id ON spend (wave_id);
CREATE TABLE council (
	id INTEGER NOT NULL, 
	ts DATETIME NOT NULL, 
	run_id VARCHAR NOT NULL, 
	model VARCHAR NOT NULL, 
	role VARCHAR NOT NULL, 
	status VARCHAR NOT NULL, 
	reviewed BOOLEAN NOT NULL, 
	conformed BOOLEAN, 
	cut BOOLEAN NOT NULL, 
	findings_blocker INTEGER NOT NULL, 
	findings_major INTEGER NOT NULL, 
	findings_minor INTEGER NOT NULL, 
	findings_nit INTEGER NOT NULL, 
	confirmed INTEGER NOT NULL, 
	street_cred FLOAT, 
	verdict VARCHAR, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_council_ts ON council (ts);
CREATE INDEX ix_council_model ON council (model);
CREATE INDEX ix_council_run_id ON council (run_id);
