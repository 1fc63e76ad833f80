-- Make a session read-only by construction: after this, only the listed files
-- can be read, nothing can be written, attached, installed or loaded, and the
-- settings cannot be changed back.
SET allowed_paths = {{.Paths}};
SET allowed_directories = {{.Dirs}};
SET enable_external_access = false;
SET lock_configuration = true;
