/// The fleet store's schema in PostgreSQL, versioned with forward migrations like the SQLite one (Schema.swift):
/// `keyway_schema` holds the version; `keyway store migrate` applies what is missing as the database's owner, and
/// keywayd, whose role may not change the schema, refuses a version other than its own (keywayd(8), FLEETS).
enum PostgresSchema {
    /// Migration N (1-based) brings the schema from version N-1 to N. Append only; never edit a shipped one.
    /// Text keys compare byte by byte (`COLLATE "C"`), as SQLite's do, whatever the database's locale.
    static let migrations: [String] = [
        """
        CREATE TABLE enrollments (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            payload bytea NOT NULL,
            changed_at bigint NOT NULL,
            changed_by text NOT NULL,
            PRIMARY KEY (account, factor)
        );
        CREATE TABLE attempts (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            failures integer NOT NULL CHECK (failures >= 0),
            last_failure bigint,
            recent_mismatches bytea NOT NULL,
            last_success bigint,
            PRIMARY KEY (account, factor)
        );
        CREATE TABLE audit (
            id bigserial PRIMARY KEY,
            at bigint NOT NULL,
            host text,
            actor text NOT NULL,
            account text COLLATE "C" NOT NULL,
            action text NOT NULL,
            factor text,
            detail text
        );
        CREATE INDEX audit_by_account ON audit (account, id);
        CREATE TABLE preferences (
            account text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (account, key)
        );
        """,
        // 2: least privilege for hosts (keywayd(8), FLEETS, "Trust"). A host's role gets no table rights, only these
        // functions, which run as the owner (SECURITY DEFINER) with a fixed search_path, the schema's and then
        // pg_temp, so no object a host makes can stand in for one of ours. A caller with table rights (the owner, an
        // administrator's role, a host granted self-service) passes every rule: the rules are for hosts.
        """
        CREATE EXTENSION IF NOT EXISTS pgcrypto SCHEMA @schema;
        ALTER TABLE attempts ADD COLUMN lowered_by text, ADD COLUMN lowered_at bigint, ADD COLUMN success_xact xid8;
        ALTER TABLE audit ADD COLUMN role text DEFAULT session_user;
        CREATE TABLE sealed (factor text COLLATE "C" PRIMARY KEY, header integer NOT NULL CHECK (header >= 0));
        INSERT INTO sealed VALUES ('totp', 3);
        CREATE TABLE code_checks (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            step bigint NOT NULL,
            checks integer NOT NULL,
            PRIMARY KEY (account, factor)
        );

        CREATE FUNCTION keyway_privileged() RETURNS boolean LANGUAGE sql STABLE
            SET search_path = @schema, pg_temp
            AS $$ SELECT has_table_privilege(session_user, 'enrollments', 'UPDATE') $$;

        -- What a caller may see of an enrollment's payload: a sealed factor's header alone unless it has table rights.
        CREATE FUNCTION keyway_shown(p_factor text, p_payload bytea) RETURNS bytea LANGUAGE sql STABLE
            SET search_path = @schema, pg_temp AS $$
            SELECT coalesce((SELECT substr(p_payload, 1, header) FROM sealed
                WHERE factor = p_factor AND NOT keyway_privileged()), p_payload) $$;

        CREATE FUNCTION keyway_enrollment_rows(p_account text, p_factor text)
            RETURNS TABLE (account text, factor text, payload bytea, changed_at bigint, changed_by text)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT account, factor, keyway_shown(factor, payload), changed_at, changed_by FROM enrollments
            WHERE account = p_account AND (p_factor IS NULL OR factor = p_factor) ORDER BY factor $$;

        CREATE FUNCTION keyway_enrollments_of(p_factor text)
            RETURNS TABLE (account text, factor text, payload bytea, changed_at bigint, changed_by text)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT account, factor, keyway_shown(factor, payload), changed_at, changed_by FROM enrollments
            WHERE factor = p_factor ORDER BY account $$;

        CREATE FUNCTION keyway_attempt_rows(p_account text)
            RETURNS TABLE (factor text, failures integer, last_failure bigint, recent_mismatches bytea,
                last_success bigint)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT factor, failures, last_failure, recent_mismatches, last_success FROM attempts
            WHERE account = p_account $$;

        CREATE FUNCTION keyway_preference_rows(p_account text) RETURNS TABLE (key text, value text)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT key, value FROM preferences WHERE account = p_account $$;

        -- One factor's counters, as a host may change them: a failure may be counted freely; a counter may fall
        -- only in a transaction that records a success of the account (its row written first, when it last
        -- succeeded moved forward and not into the future) or by one, as the refund of a repeated wrong secret;
        -- when a factor last succeeded never moves back. Each fall is stamped with the role and the database's
        -- time.
        \(putAttempts(replacing: false, futureMargin: 300_000))

        -- A one-time code (RFC 6238) checked here, with the secret that never leaves the database, by the
        -- database's clock: the step that matched within p_window either side, and the code's fingerprint as a
        -- wrong one. At most 16 checks per account and factor in one step, from all hosts together, so a host
        -- cannot use this to search for a code.
        CREATE FUNCTION keyway_check_code(p_account text, p_factor text, p_code text, p_window integer)
            RETURNS TABLE (step bigint, fingerprint bytea)
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            record bytea;
            header integer;
            digits integer;
            key bytea;
            now_step bigint;
            candidate bigint;
            mac bytea;
            place integer;
            binary_code bigint;
            matched bigint;
            checked integer;
        BEGIN
            SELECT e.payload, s.header INTO record, header
            FROM enrollments e JOIN sealed s ON s.factor = e.factor
            WHERE e.account = p_account AND e.factor = p_factor;
            IF NOT FOUND THEN RETURN; END IF;
            IF length(record) <= header OR get_byte(record, 0) <> 1 OR get_byte(record, 2) = 0 THEN
                RAISE EXCEPTION 'the stored % of % is not a version-1 record', p_factor, p_account;
            END IF;
            IF p_window < 0 OR p_window > 10 THEN
                RAISE EXCEPTION 'a window of % steps is refused (0 to 10)', p_window;
            END IF;
            digits := get_byte(record, 1);
            key := substring(record FROM header + 1);
            now_step := floor(extract(epoch FROM clock_timestamp()) / get_byte(record, 2))::bigint;
            INSERT INTO code_checks AS c VALUES (p_account, p_factor, now_step, 1)
            ON CONFLICT (account, factor) DO UPDATE
                SET checks = CASE WHEN c.step = excluded.step THEN c.checks + 1 ELSE 1 END, step = excluded.step
            RETURNING c.checks INTO checked;
            IF checked > 16 THEN
                RAISE EXCEPTION 'more than 16 codes of % of % checked in one step', p_factor, p_account
                    USING ERRCODE = '42501';
            END IF;
            FOR candidate IN now_step - p_window .. now_step + p_window LOOP
                mac := hmac(int8send(candidate::bigint), key, 'sha1');
                place := get_byte(mac, 19) & 15;
                -- (PostgreSQL gives & << | one precedence, left to right: each term is bracketed.)
                binary_code := ((get_byte(mac, place) & 127)::bigint << 24) | (get_byte(mac, place + 1)::bigint << 16)
                    | (get_byte(mac, place + 2)::bigint << 8) | get_byte(mac, place + 3)::bigint;
                IF matched IS NULL
                    AND lpad((binary_code % (10 ^ digits)::bigint)::text, digits, '0') = p_code
                THEN
                    matched := candidate;
                END IF;
            END LOOP;
            RETURN QUERY SELECT matched, substring(hmac(convert_to('mismatch', 'UTF8') || int8send(now_step)
                || convert_to(p_code, 'UTF8'), key, 'sha1') FROM 1 FOR 16);
        END $$;

        -- Whether p_new is p_old with one use taken out, as a host may swap it: a recovery set with one hash gone
        -- (Plugins/Recovery: a version byte, the count made, the hashes one per line); a pass with one use fewer
        -- (Sources/KeywayCore/TemporaryPass.swift: six lines, the fourth the uses left); security keys whose
        -- signature counters and clone marks only went up (Plugins/FIDO2: a version byte, a count, then per key
        -- a name, an id, an algorithm, a public key, each field a 4-byte length and its bytes, then a 4-byte
        -- counter and a flag byte). Anything else (another factor, a new set, a new key) is not a use.
        CREATE FUNCTION keyway_is_use(p_factor text, p_old bytea, p_new bytea) RETURNS boolean
            LANGUAGE plpgsql IMMUTABLE SET search_path = @schema, pg_temp AS $$
        DECLARE
            old_list text[];
            new_list text[];
            place_at integer := 2;
            length_of integer;
            counter_at integer;
            masked_old bytea := p_old;
            masked_new bytea := p_new;
        BEGIN
            IF p_factor = 'recovery' THEN
                IF substr(p_old, 1, 2) <> substr(p_new, 1, 2) OR get_byte(p_old, 0) <> 1 THEN RETURN false; END IF;
                old_list := string_to_array(convert_from(substr(p_old, 3), 'UTF8'), E'\\n');
                new_list := string_to_array(convert_from(substr(p_new, 3), 'UTF8'), E'\\n');
                RETURN cardinality(new_list) = cardinality(old_list) - 1 AND new_list <@ old_list;
            ELSIF p_factor = 'pass' THEN
                old_list := string_to_array(convert_from(p_old, 'UTF8'), E'\\n');
                new_list := string_to_array(convert_from(p_new, 'UTF8'), E'\\n');
                RETURN cardinality(old_list) = 6 AND cardinality(new_list) = 6 AND old_list[1] = '1'
                    AND old_list[1:3] = new_list[1:3] AND old_list[5:6] = new_list[5:6]
                    AND new_list[4] ~ '^[0-9]{1,9}$' AND old_list[4] ~ '^[0-9]{1,9}$'
                    AND new_list[4]::integer = old_list[4]::integer - 1 AND new_list[4]::integer >= 0;
            ELSIF p_factor = 'fido2' THEN
                IF length(p_old) <> length(p_new) OR substr(p_old, 1, 2) <> substr(p_new, 1, 2)
                    OR get_byte(p_old, 0) <> 1
                THEN
                    RETURN false;
                END IF;
                FOR key IN 1 .. get_byte(p_old, 1) LOOP
                    FOR field IN 1 .. 4 LOOP
                        IF field = 3 THEN  -- the algorithm: four bytes
                            place_at := place_at + 4;
                            CONTINUE;
                        END IF;
                        length_of := (get_byte(p_old, place_at)::bigint << 24) | (get_byte(p_old, place_at + 1) << 16)
                            | (get_byte(p_old, place_at + 2) << 8) | get_byte(p_old, place_at + 3);
                        place_at := place_at + 4 + length_of;
                    END LOOP;
                    counter_at := place_at;
                    IF substr(p_new, counter_at + 1, 4) < substr(p_old, counter_at + 1, 4)
                        OR get_byte(p_new, counter_at + 4) NOT IN (0, 1)
                        OR get_byte(p_new, counter_at + 4) < get_byte(p_old, counter_at + 4)
                    THEN
                        RETURN false;
                    END IF;
                    masked_old := overlay(masked_old PLACING '\\x0000000000'::bytea FROM counter_at + 1 FOR 5);
                    masked_new := overlay(masked_new PLACING '\\x0000000000'::bytea FROM counter_at + 1 FOR 5);
                    place_at := counter_at + 5;
                END LOOP;
                RETURN place_at = length(p_old) AND masked_old = masked_new;
            END IF;
            RETURN false;
        END $$;

        -- A single-use secret spent (a recovery code, a pass, a security key's counter): the record swapped only
        -- if it is still p_old, with its audit row. A host may swap a record only for the same one with a use
        -- taken out (keyway_is_use), keeping when and by whom it was made, recorded as a use or a mark.
        CREATE FUNCTION keyway_replace(p_account text, p_factor text, p_old bytea, p_new bytea, p_changed_at bigint,
            p_changed_by text, p_at bigint, p_host text, p_actor text, p_action text, p_detail text)
            RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old enrollments%ROWTYPE;
        BEGIN
            SELECT * INTO old FROM enrollments WHERE account = p_account AND factor = p_factor FOR UPDATE;
            IF NOT FOUND OR old.payload <> p_old THEN RETURN false; END IF;
            IF NOT keyway_privileged() AND (NOT keyway_is_use(p_factor, old.payload, p_new)
                OR p_action NOT IN ('use', 'mark') OR p_changed_at <> old.changed_at
                OR p_changed_by <> old.changed_by)
            THEN
                RAISE EXCEPTION 'a host may not change the % of %: only an administrator''s role changes '
                    'enrollments', p_factor, p_account USING ERRCODE = '42501';
            END IF;
            UPDATE enrollments SET payload = p_new, changed_at = p_changed_at, changed_by = p_changed_by
            WHERE account = p_account AND factor = p_factor;
            INSERT INTO audit (at, host, actor, account, action, factor, detail)
            VALUES (p_at, p_host, p_actor, p_account, p_action, p_factor, p_detail);
            RETURN true;
        END $$;

        -- Counters of names without an enrollment, beyond the latest p_limit, none that decides anything
        -- (Store.pruneCounters): what a host may clear.
        \(pruneCounters(replacing: false, deciding: "p_deciding"))

        REVOKE ALL ON FUNCTION keyway_privileged(), keyway_shown(text, bytea), keyway_enrollment_rows(text, text),
            keyway_enrollments_of(text),
            keyway_attempt_rows(text), keyway_preference_rows(text),
            keyway_put_attempts(text, text, integer, bigint, bytea, bigint),
            keyway_check_code(text, text, text, integer),
            keyway_is_use(text, bytea, bytea),
            keyway_replace(text, text, bytea, bytea, bigint, text, bigint, text, text, text, text),
            keyway_prune_counters(integer, integer) FROM PUBLIC;
        """,
        // 3: the names a lockout can be on, for keywayd's metrics (keyway_locked_accounts); a host reads no table.
        """
        CREATE FUNCTION keyway_failing_accounts(p_least integer, p_limit integer) RETURNS SETOF text
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT DISTINCT account FROM attempts WHERE failures >= p_least ORDER BY account
            LIMIT greatest(p_limit, 0) $$;
        REVOKE ALL ON FUNCTION keyway_failing_accounts(integer, integer) FROM PUBLIC;
        """,
        // 4: promises a host's role cannot undo (keywayd(8), FLEETS, "Trust"; docs/ARCHITECTURE.md §17). A code is
        // checked only once its reservation was committed by an earlier transaction, so what the caller does with
        // its own transaction (a rollback, a savepoint, an exception block) cannot give a count back; the window is
        // the database's; the budget counts wrong codes per role and channel, so neither a host nor a stranger
        // through one spends another's; a code's step is marked used by the database, so no success is dated in
        // the future; a use's time and host are the database's and the role's.
        """
        CREATE TABLE host_names (role text PRIMARY KEY, host text NOT NULL);
        ALTER TABLE sealed ADD COLUMN code_window integer NOT NULL DEFAULT 1 CHECK (code_window BETWEEN 0 AND 10);
        CREATE TABLE code_budgets (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            role text NOT NULL,
            channel text NOT NULL,
            step bigint NOT NULL,
            spent integer NOT NULL,
            PRIMARY KEY (account, factor, role, channel)
        );
        CREATE TABLE code_reservations (
            id bigserial PRIMARY KEY,
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            role text NOT NULL,
            channel text NOT NULL,
            step bigint NOT NULL,
            code text NOT NULL,
            made_in xid8 NOT NULL,
            checked boolean NOT NULL DEFAULT false
        );
        CREATE INDEX code_reservations_by_account ON code_reservations (account, factor, role, channel, step);
        -- The step of the last code accepted, for the enrollment made at changed_at (a new secret starts over).
        CREATE TABLE code_marks (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            step bigint NOT NULL,
            changed_at bigint NOT NULL,
            PRIMARY KEY (account, factor)
        );
        INSERT INTO code_marks
            SELECT a.account, a.factor, floor(a.last_success / 1000.0 / get_byte(e.payload, 2))::bigint, e.changed_at
            FROM attempts a JOIN enrollments e ON e.account = a.account AND e.factor = a.factor
                JOIN sealed s ON s.factor = a.factor
            WHERE a.last_success IS NOT NULL AND length(e.payload) > 2 AND get_byte(e.payload, 2) > 0;
        CREATE INDEX audit_by_role ON audit (role, at);

        -- The step a one-time code of p_factor of p_account is judged in now, with the record it is judged by; nothing
        -- when there is no such enrollment.
        CREATE FUNCTION keyway_code_record(p_account text, p_factor text,
            OUT record bytea, OUT header integer, OUT code_window integer, OUT changed_at bigint, OUT now_step bigint)
            LANGUAGE plpgsql STABLE SET search_path = @schema, pg_temp AS $$
        BEGIN
            SELECT e.payload, s.header, s.code_window, e.changed_at INTO record, header, code_window, changed_at
            FROM enrollments e JOIN sealed s ON s.factor = e.factor
            WHERE e.account = p_account AND e.factor = p_factor;
            IF NOT FOUND THEN RETURN; END IF;
            IF length(record) <= header OR get_byte(record, 0) <> 1 OR get_byte(record, 2) = 0 THEN
                RAISE EXCEPTION 'the stored % of % is not a version-1 record', p_factor, p_account;
            END IF;
            now_step := floor(extract(epoch FROM clock_timestamp()) / get_byte(record, 2))::bigint;
        END $$;

        -- Books the check of one code, in its own transaction, which the caller must commit before the check
        -- (keyway_check_code): the count is then beyond the caller's reach. At most 8 codes that did not match per
        -- account, role and channel in one step: a stranger through one host's sshd, or root on another host, does
        -- not spend what the console has. False when there is no such enrollment; the budget spent is refused with
        -- SQLSTATE KWB01 and books nothing.
        CREATE FUNCTION keyway_reserve_code(p_account text, p_factor text, p_code text, p_remote boolean)
            RETURNS boolean
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            judged record;
            v_channel text := CASE WHEN p_remote THEN 'remote' ELSE 'local' END;
            v_spent integer;
        BEGIN
            SELECT * INTO judged FROM keyway_code_record(p_account, p_factor);
            IF judged.record IS NULL THEN RETURN false; END IF;
            IF p_code !~ '^[0-9]{6,10}$' THEN
                RAISE EXCEPTION 'a code is 6 to 10 digits' USING ERRCODE = '22023';
            END IF;
            INSERT INTO code_budgets AS b VALUES (p_account, p_factor, session_user, v_channel, judged.now_step, 1)
            ON CONFLICT (account, factor, role, channel) DO UPDATE
                SET spent = CASE WHEN b.step = excluded.step THEN b.spent + 1 ELSE 1 END, step = excluded.step
            RETURNING b.spent INTO v_spent;
            IF v_spent > 8 THEN
                RAISE EXCEPTION '8 wrong codes of % of % from % (%) in this step; the next step has its own',
                    p_factor, p_account, session_user, v_channel USING ERRCODE = 'KWB01';
            END IF;
            DELETE FROM code_reservations WHERE account = p_account AND factor = p_factor
                AND step < judged.now_step - 1;
            INSERT INTO code_reservations (account, factor, role, channel, step, code, made_in)
            VALUES (p_account, p_factor, session_user, v_channel, judged.now_step, p_code, pg_current_xact_id());
            RETURN true;
        END $$;

        -- A one-time code (RFC 6238) checked here, with the secret that never leaves the database: only a code
        -- this role reserved in a transaction committed before this one and not checked since, judged in the step
        -- it was reserved in, so checking it again (after a rollback) tells nothing new. Within the database's
        -- window (sealed.code_window), which the caller must name; a step at or before the last one accepted for
        -- this enrollment, or before it was made, is a used code. A match marks its step and gives the budget its
        -- count back. The step that matched, and the code's fingerprint as a wrong one; nothing when there is no
        -- such enrollment.
        CREATE FUNCTION keyway_check_code(p_account text, p_factor text, p_code text, p_window integer,
            p_remote boolean) RETURNS TABLE (step bigint, fingerprint bytea)
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            judged record;
            booked code_reservations%ROWTYPE;
            digits integer;
            key bytea;
            used bigint;
            candidate bigint;
            mac bytea;
            place integer;
            binary_code bigint;
            matched bigint;
        BEGIN
            SELECT * INTO judged FROM keyway_code_record(p_account, p_factor);
            IF judged.record IS NULL THEN RETURN; END IF;
            IF p_window IS DISTINCT FROM judged.code_window THEN
                RAISE EXCEPTION 'this database checks codes of % within % steps either side, not %: set [totp] '
                    'window = % in keyway.conf', p_factor, judged.code_window, p_window, judged.code_window
                    USING ERRCODE = '22023';
            END IF;
            SELECT * INTO booked FROM code_reservations c
            WHERE c.account = p_account AND c.factor = p_factor AND c.role = session_user
                AND c.channel = CASE WHEN p_remote THEN 'remote' ELSE 'local' END AND c.code = p_code
                AND NOT c.checked AND c.made_in <> pg_current_xact_id() AND c.step >= judged.now_step - 1
            ORDER BY c.step DESC, c.id DESC LIMIT 1 FOR UPDATE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'no check of this code of % of % was reserved and committed before this '
                    'transaction (keyway_reserve_code)', p_factor, p_account USING ERRCODE = '42501';
            END IF;
            digits := get_byte(judged.record, 1);
            key := substring(judged.record FROM judged.header + 1);
            SELECT CASE WHEN m.changed_at = judged.changed_at THEN m.step END INTO used FROM code_marks m
            WHERE m.account = p_account AND m.factor = p_factor;
            used := greatest(used, floor(judged.changed_at / 1000.0 / get_byte(judged.record, 2))::bigint);
            FOR candidate IN booked.step - judged.code_window .. booked.step + judged.code_window LOOP
                mac := hmac(int8send(candidate::bigint), key, 'sha1');
                place := get_byte(mac, 19) & 15;
                -- (PostgreSQL gives & << | one precedence, left to right: each term is bracketed.)
                binary_code := ((get_byte(mac, place) & 127)::bigint << 24) | (get_byte(mac, place + 1)::bigint << 16)
                    | (get_byte(mac, place + 2)::bigint << 8) | get_byte(mac, place + 3)::bigint;
                IF matched IS NULL AND candidate > used
                    AND lpad((binary_code % (10 ^ digits)::bigint)::text, digits, '0') = p_code
                THEN
                    matched := candidate;
                END IF;
            END LOOP;
            UPDATE code_reservations SET checked = true WHERE id = booked.id;
            IF matched IS NOT NULL THEN
                INSERT INTO code_marks VALUES (p_account, p_factor, matched, judged.changed_at)
                ON CONFLICT (account, factor) DO UPDATE SET step = excluded.step, changed_at = excluded.changed_at;
                UPDATE code_budgets b SET spent = b.spent - 1
                WHERE b.account = p_account AND b.factor = p_factor AND b.role = booked.role
                    AND b.channel = booked.channel AND b.step = booked.step AND b.spent > 0;
            END IF;
            RETURN QUERY SELECT matched, substring(hmac(convert_to('mismatch', 'UTF8') || int8send(booked.step)
                || convert_to(p_code, 'UTF8'), key, 'sha1') FROM 1 FOR 16);
        END $$;

        -- Grants follow the function they replace: every role that could check a code can reserve and check one.
        DO $$
        DECLARE
            grantee text;
        BEGIN
            FOR grantee IN SELECT DISTINCT p.grantee FROM information_schema.routine_privileges p
                WHERE p.routine_name = 'keyway_check_code' AND p.routine_schema = current_schema()
                    AND p.privilege_type = 'EXECUTE' AND p.grantee NOT IN (current_user, 'PUBLIC')
            LOOP
                EXECUTE format('GRANT EXECUTE ON FUNCTION keyway_reserve_code(text, text, text, boolean), '
                    'keyway_check_code(text, text, text, integer, boolean) TO %I', grantee);
            END LOOP;
        END $$;
        DROP FUNCTION keyway_check_code(text, text, text, integer);
        DROP TABLE code_checks;

        -- As in migration 2, with no success more than 2 s (clock skew) ahead of the database's clock: a one-time
        -- code's step is now the database's mark (code_marks), never a success in the future.
        \(putAttempts(replacing: true, futureMargin: 2000))

        -- As in migration 2, with a recovery set compared as a list (one hash taken out where it was, so a hash
        -- cannot be kept twice) and a security key's signature counter raised by at most 65,536 per use.
        CREATE OR REPLACE FUNCTION keyway_is_use(p_factor text, p_old bytea, p_new bytea) RETURNS boolean
            LANGUAGE plpgsql IMMUTABLE SET search_path = @schema, pg_temp AS $$
        DECLARE
            old_list text[];
            new_list text[];
            place_at integer := 2;
            length_of integer;
            counter_at integer;
            old_counter bigint;
            new_counter bigint;
            masked_old bytea := p_old;
            masked_new bytea := p_new;
        BEGIN
            IF p_factor = 'recovery' THEN
                IF substr(p_old, 1, 2) <> substr(p_new, 1, 2) OR get_byte(p_old, 0) <> 1 THEN RETURN false; END IF;
                old_list := string_to_array(convert_from(substr(p_old, 3), 'UTF8'), E'\\n');
                new_list := string_to_array(convert_from(substr(p_new, 3), 'UTF8'), E'\\n');
                IF cardinality(new_list) <> cardinality(old_list) - 1 THEN RETURN false; END IF;
                FOR gone IN 1 .. cardinality(old_list) LOOP
                    IF new_list IS NOT DISTINCT FROM old_list[1:gone - 1] || old_list[gone + 1:] THEN RETURN true; END IF;
                END LOOP;
                RETURN false;
            ELSIF p_factor = 'pass' THEN
                old_list := string_to_array(convert_from(p_old, 'UTF8'), E'\\n');
                new_list := string_to_array(convert_from(p_new, 'UTF8'), E'\\n');
                RETURN cardinality(old_list) = 6 AND cardinality(new_list) = 6 AND old_list[1] = '1'
                    AND old_list[1:3] = new_list[1:3] AND old_list[5:6] = new_list[5:6]
                    AND new_list[4] ~ '^[0-9]{1,9}$' AND old_list[4] ~ '^[0-9]{1,9}$'
                    AND new_list[4]::integer = old_list[4]::integer - 1 AND new_list[4]::integer >= 0;
            ELSIF p_factor = 'fido2' THEN
                IF length(p_old) <> length(p_new) OR substr(p_old, 1, 2) <> substr(p_new, 1, 2)
                    OR get_byte(p_old, 0) <> 1
                THEN
                    RETURN false;
                END IF;
                FOR key IN 1 .. get_byte(p_old, 1) LOOP
                    FOR field IN 1 .. 4 LOOP
                        IF field = 3 THEN  -- the algorithm: four bytes
                            place_at := place_at + 4;
                            CONTINUE;
                        END IF;
                        length_of := (get_byte(p_old, place_at)::bigint << 24) | (get_byte(p_old, place_at + 1) << 16)
                            | (get_byte(p_old, place_at + 2) << 8) | get_byte(p_old, place_at + 3);
                        place_at := place_at + 4 + length_of;
                    END LOOP;
                    counter_at := place_at;
                    old_counter := (get_byte(p_old, counter_at)::bigint << 24)
                        | (get_byte(p_old, counter_at + 1)::bigint << 16)
                        | (get_byte(p_old, counter_at + 2)::bigint << 8) | get_byte(p_old, counter_at + 3)::bigint;
                    new_counter := (get_byte(p_new, counter_at)::bigint << 24)
                        | (get_byte(p_new, counter_at + 1)::bigint << 16)
                        | (get_byte(p_new, counter_at + 2)::bigint << 8) | get_byte(p_new, counter_at + 3)::bigint;
                    IF new_counter < old_counter OR new_counter > old_counter + 65536
                        OR get_byte(p_new, counter_at + 4) NOT IN (0, 1)
                        OR get_byte(p_new, counter_at + 4) < get_byte(p_old, counter_at + 4)
                    THEN
                        RETURN false;
                    END IF;
                    masked_old := overlay(masked_old PLACING '\\x0000000000'::bytea FROM counter_at + 1 FOR 5);
                    masked_new := overlay(masked_new PLACING '\\x0000000000'::bytea FROM counter_at + 1 FOR 5);
                    place_at := counter_at + 5;
                END LOOP;
                RETURN place_at = length(p_old) AND masked_old = masked_new;
            END IF;
            RETURN false;
        END $$;

        -- As in migration 2, with a host's use written at the database's time, under the host name the
        -- administrator gave its role (host_names; the role's own name without one), only when it changes the
        -- record, and at most 120 a minute per role.
        CREATE OR REPLACE FUNCTION keyway_replace(p_account text, p_factor text, p_old bytea, p_new bytea,
            p_changed_at bigint, p_changed_by text, p_at bigint, p_host text, p_actor text, p_action text,
            p_detail text)
            RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old enrollments%ROWTYPE;
            now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
            v_at bigint := p_at;
            v_host text := p_host;
        BEGIN
            SELECT * INTO old FROM enrollments WHERE account = p_account AND factor = p_factor FOR UPDATE;
            IF NOT FOUND OR old.payload <> p_old THEN RETURN false; END IF;
            IF NOT keyway_privileged() THEN
                IF p_new = old.payload OR NOT keyway_is_use(p_factor, old.payload, p_new)
                    OR p_action NOT IN ('use', 'mark') OR p_changed_at <> old.changed_at
                    OR p_changed_by <> old.changed_by
                THEN
                    RAISE EXCEPTION 'a host may not change the % of %: only an administrator''s role changes '
                        'enrollments', p_factor, p_account USING ERRCODE = '42501';
                END IF;
                IF (SELECT count(*) FROM audit WHERE role = session_user AND audit.at > now_ms - 60000) >= 120 THEN
                    RAISE EXCEPTION 'more than 120 uses a minute from %', session_user USING ERRCODE = 'KWB01';
                END IF;
                v_at := now_ms;
                v_host := coalesce((SELECT h.host FROM host_names h WHERE h.role = session_user), session_user);
            END IF;
            UPDATE enrollments SET payload = p_new, changed_at = p_changed_at, changed_by = p_changed_by
            WHERE account = p_account AND factor = p_factor;
            INSERT INTO audit (at, host, actor, account, action, factor, detail)
            VALUES (v_at, v_host, p_actor, p_account, p_action, p_factor, p_detail);
            RETURN true;
        END $$;

        -- As in migration 2, deciding by Keyway's own constant (AttemptState.deciding, 5 failures), whatever the
        -- caller passes as p_deciding: a host cannot have a counter that decides something pruned.
        \(pruneCounters(replacing: true, deciding: "5"))

        REVOKE ALL ON FUNCTION keyway_code_record(text, text), keyway_reserve_code(text, text, text, boolean),
            keyway_check_code(text, text, text, integer, boolean) FROM PUBLIC;
        """,
        // 5: the store knows no factor's format (docs/ARCHITECTURE.md §17, "Spendable parts"). What a use changes of
        // a record (uses left, a signature counter, a clone mark) is kept apart from the rest as rows, each with its
        // rule, written by the factor's own split (SpendableLayout) when the record is enrolled, copied or migrated
        // (PostgresStore.migrate splits the records already here). A host changes a record only by one use of one
        // row, judged by the row's rule (keyway_spend); no function parses a factor's bytes any more.
        """
        CREATE TABLE spendables (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            position integer NOT NULL CHECK (position >= 0),
            name text NOT NULL CHECK (name <> '' AND strpos(name, E'\\n') = 0),
            value bigint NOT NULL CHECK (value >= 0),
            rule text NOT NULL CHECK (rule IN ('falls', 'rises')),
            step bigint CHECK (step > 0),
            ceiling bigint CHECK (ceiling >= 0),
            CHECK ((rule = 'falls') = (step IS NULL AND ceiling IS NULL)),
            CHECK (value <= ceiling OR ceiling IS NULL),
            PRIMARY KEY (account, factor, position),
            FOREIGN KEY (account, factor) REFERENCES enrollments (account, factor) ON DELETE CASCADE
        );

        -- The spendable parts of an account's records (of one factor, or all), in each record's order.
        CREATE FUNCTION keyway_spendable_rows(p_account text, p_factor text)
            RETURNS TABLE (account text, factor text, name text, value bigint, rule text, step bigint, ceiling bigint)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT account, factor, name, value, rule, step, ceiling FROM spendables
            WHERE account = p_account AND (p_factor IS NULL OR factor = p_factor) ORDER BY factor, position $$;

        -- The spendable parts of every record of one factor, in each record's order.
        CREATE FUNCTION keyway_spendables_of(p_factor text)
            RETURNS TABLE (account text, factor text, name text, value bigint, rule text, step bigint, ceiling bigint)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            SELECT account, factor, name, value, rule, step, ceiling FROM spendables
            WHERE factor = p_factor ORDER BY account, position $$;

        -- One use of a record, as any role makes it: the record still the one the caller read (its fixed part and
        -- when it was made), and one part named p_name taken from p_from to p_to as its rule allows ("falls": by
        -- exactly one, never below 0; "rises": by 1 to step, never beyond ceiling). A p_name of NULL is a use that
        -- changes nothing (a key that keeps no counter): true while the record is current, and nothing written.
        -- False when the record or the part is no longer what the caller read (another use came first). The audit
        -- row is dated by the database; a host's is under the name the administrator gave its role (host_names),
        -- at most 120 a minute per role.
        CREATE FUNCTION keyway_spend(p_account text, p_factor text, p_fixed bytea, p_changed_at bigint,
            p_name text, p_from bigint, p_to bigint, p_host text, p_actor text, p_action text, p_detail text)
            RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old enrollments%ROWTYPE;
            part spendables%ROWTYPE;
            allowed boolean;
            now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
            v_host text := p_host;
        BEGIN
            IF p_action IS DISTINCT FROM 'use' AND p_action IS DISTINCT FROM 'mark' THEN
                RAISE EXCEPTION 'a spent part is recorded as a use or a mark, not %', p_action USING ERRCODE = '22023';
            END IF;
            SELECT * INTO old FROM enrollments WHERE account = p_account AND factor = p_factor FOR UPDATE;
            IF NOT FOUND OR old.payload <> p_fixed OR old.changed_at <> p_changed_at THEN RETURN false; END IF;
            IF p_name IS NULL THEN RETURN true; END IF;
            SELECT * INTO part FROM spendables s
            WHERE s.account = p_account AND s.factor = p_factor AND s.name = p_name AND s.value = p_from
            ORDER BY s.position LIMIT 1 FOR UPDATE;
            IF NOT FOUND THEN RETURN false; END IF;
            -- (Computed first: PL/pgSQL ends an IF's condition at the first THEN, a CASE's included.)
            allowed := CASE part.rule
                WHEN 'falls' THEN p_to = part.value - 1 AND p_to >= 0
                ELSE p_to > part.value AND p_to - part.value <= part.step AND p_to <= part.ceiling END;
            IF NOT allowed THEN
                RAISE EXCEPTION 'one use of the % of % may not take "%" from % to % (its rule: %)', p_factor,
                    p_account, p_name, p_from, p_to, CASE part.rule WHEN 'falls' THEN 'falls by one'
                    ELSE format('rises by at most %s, to at most %s', part.step, part.ceiling) END
                    USING ERRCODE = '42501';
            END IF;
            IF NOT keyway_privileged() THEN
                IF (SELECT count(*) FROM audit WHERE role = session_user AND audit.at > now_ms - 60000) >= 120 THEN
                    RAISE EXCEPTION 'more than 120 uses a minute from %', session_user USING ERRCODE = 'KWB01';
                END IF;
                v_host := coalesce((SELECT h.host FROM host_names h WHERE h.role = session_user), session_user);
            END IF;
            UPDATE spendables SET value = p_to
            WHERE account = p_account AND factor = p_factor AND position = part.position;
            INSERT INTO audit (at, host, actor, account, action, factor, detail)
            VALUES (now_ms, v_host, p_actor, p_account, p_action, p_factor, p_detail);
            RETURN true;
        END $$;

        -- As in migration 4, for an administrator's role alone: a host changes a record only by spending one use of
        -- it (keyway_spend).
        CREATE OR REPLACE FUNCTION keyway_replace(p_account text, p_factor text, p_old bytea, p_new bytea,
            p_changed_at bigint, p_changed_by text, p_at bigint, p_host text, p_actor text, p_action text,
            p_detail text)
            RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old enrollments%ROWTYPE;
        BEGIN
            IF NOT keyway_privileged() THEN
                RAISE EXCEPTION 'a host may not change the % of %: it spends one use of a record (keyway_spend); '
                    'only an administrator''s role changes enrollments', p_factor, p_account USING ERRCODE = '42501';
            END IF;
            SELECT * INTO old FROM enrollments WHERE account = p_account AND factor = p_factor FOR UPDATE;
            IF NOT FOUND OR old.payload <> p_old THEN RETURN false; END IF;
            UPDATE enrollments SET payload = p_new, changed_at = p_changed_at, changed_by = p_changed_by
            WHERE account = p_account AND factor = p_factor;
            INSERT INTO audit (at, host, actor, account, action, factor, detail)
            VALUES (p_at, p_host, p_actor, p_account, p_action, p_factor, p_detail);
            RETURN true;
        END $$;
        DROP FUNCTION keyway_is_use(text, bytea, bytea);

        REVOKE ALL ON FUNCTION keyway_spendable_rows(text, text), keyway_spendables_of(text),
            keyway_spend(text, text, bytea, bigint, text, bigint, bigint, text, text, text, text) FROM PUBLIC;
        -- Grants follow the functions a host already had: every role that could read a record reads its parts and
        -- spends them.
        DO $$
        DECLARE
            grantee text;
        BEGIN
            FOR grantee IN SELECT DISTINCT p.grantee FROM information_schema.routine_privileges p
                WHERE p.routine_name = 'keyway_enrollment_rows' AND p.routine_schema = current_schema()
                    AND p.privilege_type = 'EXECUTE' AND p.grantee NOT IN (current_user, 'PUBLIC')
            LOOP
                EXECUTE format('GRANT EXECUTE ON FUNCTION keyway_spendable_rows(text, text), '
                    'keyway_spendables_of(text), keyway_spend(text, text, bytea, bigint, text, bigint, bigint, text, '
                    'text, text, text) TO %I', grantee);
            END LOOP;
        END $$;
        """,
    ]

    /// keyway_put_attempts (migration 2, restated by 4 with a smaller margin): a success may be at most
    /// `futureMargin` milliseconds ahead of the database's clock.
    static func putAttempts(replacing: Bool, futureMargin: Int) -> String {
        """
        CREATE \(replacing ? "OR REPLACE " : "")FUNCTION keyway_put_attempts(p_account text, p_factor text, p_failures integer,
            p_last_failure bigint, p_mismatches bytea, p_last_success bigint) RETURNS void
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            old attempts%ROWTYPE;
            now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
            success boolean;
            lowered boolean;
        BEGIN
            SELECT * INTO old FROM attempts WHERE account = p_account AND factor = p_factor FOR UPDATE;
            success := p_last_success IS NOT NULL AND p_last_success > coalesce(old.last_success, -1);
            lowered := p_failures < coalesce(old.failures, 0);
            IF NOT keyway_privileged() THEN
                IF p_failures < 0 OR p_last_success IS DISTINCT FROM old.last_success AND NOT success THEN
                    RAISE EXCEPTION 'a host may not move back when % of % last succeeded', p_factor, p_account
                        USING ERRCODE = '42501';
                END IF;
                IF success AND p_last_success > now_ms + \(futureMargin) THEN
                    RAISE EXCEPTION 'a host may not record a success of % of % in the future', p_factor, p_account
                        USING ERRCODE = '42501';
                END IF;
                IF lowered AND NOT success
                    AND NOT EXISTS (SELECT 1 FROM attempts WHERE account = p_account
                        AND success_xact = pg_current_xact_id())
                    AND NOT (p_failures = old.failures - 1
                        AND EXISTS (SELECT 1 FROM attempts WHERE account = p_account AND recent_mismatches <> ''))
                THEN
                    RAISE EXCEPTION 'a host lowers the counter of % of % only with a success or the refund of a '
                        'repeated wrong secret', p_factor, p_account USING ERRCODE = '42501';
                END IF;
            ELSIF p_failures = 0 AND p_last_failure IS NULL AND p_mismatches = '' AND p_last_success IS NULL THEN
                DELETE FROM attempts WHERE account = p_account AND factor = p_factor;
                RETURN;
            END IF;
            INSERT INTO attempts AS a (account, factor, failures, last_failure, recent_mismatches, last_success,
                lowered_by, lowered_at, success_xact)
            VALUES (p_account, p_factor, p_failures, p_last_failure, p_mismatches, p_last_success,
                CASE WHEN lowered THEN session_user END, CASE WHEN lowered THEN now_ms END,
                CASE WHEN success THEN pg_current_xact_id() END)
            ON CONFLICT (account, factor) DO UPDATE SET failures = excluded.failures,
                last_failure = excluded.last_failure, recent_mismatches = excluded.recent_mismatches,
                last_success = excluded.last_success,
                lowered_by = coalesce(excluded.lowered_by, a.lowered_by),
                lowered_at = coalesce(excluded.lowered_at, a.lowered_at),
                success_xact = coalesce(excluded.success_xact, a.success_xact);
        END $$;
        """
    }

    /// keyway_prune_counters (migration 2, restated by 4): names whose counters reach `deciding` failures are kept.
    static func pruneCounters(replacing: Bool, deciding: String) -> String {
        """
        CREATE \(replacing ? "OR REPLACE " : "")FUNCTION keyway_prune_counters(p_deciding integer, p_limit integer) RETURNS bigint
            LANGUAGE sql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
            WITH doomed AS (SELECT account FROM attempts a WHERE NOT EXISTS
                (SELECT 1 FROM enrollments e WHERE e.account = a.account) GROUP BY account
                HAVING max(failures) < \(deciding) ORDER BY max(coalesce(last_failure, 0)) DESC, account
                OFFSET greatest(p_limit, 0)),
            gone AS (DELETE FROM attempts WHERE account IN (SELECT account FROM doomed) RETURNING account)
            SELECT count(DISTINCT account) FROM gone $$;
        """
    }

    /// The newest schema this build knows.
    static var currentVersion: Int { migrations.count }

    /// What a host's role is granted (`Grant.host`): the schema's version and the functions of migration 2, no
    /// table; revoked first, so a role granted more by an older Keyway is brought down to this. A role granted
    /// self-service (`Grant.writer`) also gets the tables' rows, as every role did before migration 2.
    static func grants(to role: String, _ grant: Grant) -> String {
        let functions = """
            keyway_privileged(), keyway_enrollment_rows(text, text), keyway_enrollments_of(text),
            keyway_attempt_rows(text), keyway_preference_rows(text),
            keyway_put_attempts(text, text, integer, bigint, bytea, bigint),
            keyway_reserve_code(text, text, text, boolean), keyway_check_code(text, text, text, integer, boolean),
            keyway_replace(text, text, bytea, bytea, bigint, text, bigint, text, text, text, text),
            keyway_spendable_rows(text, text), keyway_spendables_of(text),
            keyway_spend(text, text, bytea, bigint, text, bigint, bigint, text, text, text, text),
            keyway_prune_counters(integer, integer), keyway_failing_accounts(integer, integer)
            """
        let tables =
            "enrollments, attempts, audit, preferences, sealed, code_budgets, code_reservations, code_marks, host_names, "
            + "spendables"
        var sql = """
            REVOKE ALL ON \(tables) FROM \(role);
            REVOKE ALL ON SEQUENCE audit_id_seq FROM \(role);
            GRANT SELECT ON keyway_schema TO \(role);
            GRANT EXECUTE ON FUNCTION \(functions) TO \(role);
            """
        switch grant {
        case .host: break
        case .writer:
            sql += """

                GRANT SELECT, INSERT, UPDATE, DELETE ON enrollments, attempts, audit, preferences, spendables TO \(role);
                GRANT USAGE ON SEQUENCE audit_id_seq TO \(role);
                """
        }
        return sql
    }

    /// What a role may do in the fleet's database.
    enum Grant {
        /// A host: read what a verification needs, count and settle attempts, spend single-use secrets.
        case host
        /// A host with self-service, or an administrator: every row as well.
        case writer
    }

    /// The advisory lock that serializes migrations: the two-key form, a key space apart from the accounts' locks.
    static let migrationLock = "SELECT pg_advisory_xact_lock(19301, 31095)"
}
