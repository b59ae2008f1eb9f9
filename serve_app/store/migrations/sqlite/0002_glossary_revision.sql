-- Glossaries became editable (DeepL's v3 PATCH/PUT/DELETE of dictionaries, and the native
-- API's): every edit raises the revision, and replicas key their cached term indexes on it.

ALTER TABLE glossaries ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
