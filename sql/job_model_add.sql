-- The job's provider and model (prices.sql); values are quoted literals rendered by the Go side.
INSERT INTO job_model VALUES ({{.Provider}}, {{.Model}});
