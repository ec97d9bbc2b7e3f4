"""JDBC (Debian libpostgresql-jdbc-java, pgjdbc 42) and Quarry's types: a small Java
program compiled here.  Arrays: setArray of createArrayOf("int4" / "int8" / "text" /
"float8") parameters, getArray of results and of array columns, = ANY (?); dates, times
and intervals (setDate / setTime / setTimestamp, getDate / getTime, PGInterval of the
text); uuid (setObject / getObject as java.util.UUID), bytea (setBytes / getBytes) and
jsonb (as text), numeric (setBigDecimal / getBigDecimal, scales and exact arithmetic); each
run seven times so that pgjdbc's server-prepared statements (binary transfer from the
fifth run) are covered too.  The program prints "CHECK ok|bad what" lines."""
import os
import shutil
import subprocess

JAR = "/usr/share/java/postgresql.jar"

JAVA = r"""
import java.sql.*;
import java.util.Arrays;

public class TypesJdbc {
    static void check(boolean ok, String what) {
        System.out.println("CHECK " + (ok ? "ok " : "bad ") + what);
    }

    public static void main(String[] a) throws Exception {
        Connection c = DriverManager.getConnection(
            "jdbc:postgresql://127.0.0.1:" + a[0] + "/quarry?user=jdbct&sslmode=disable");
        Statement st = c.createStatement();
        st.execute("CREATE TABLE tjd_arr (id int8 PRIMARY KEY, tags text[], nums int4[])");
        st.execute("CREATE TABLE tjd_dt (id int8 PRIMARY KEY, d date, t time, ts timestamp, iv interval)");
        for (int run = 0; run < 7; run++) {
            String r = " (run " + run + ")";
            try (PreparedStatement p = c.prepareStatement("SELECT ?::int4[], ?::text[], ?::float8[]")) {
                p.setArray(1, c.createArrayOf("int4", new Integer[] {1, null, -3}));
                p.setArray(2, c.createArrayOf("text", new String[] {"a", "b c", null, "\"q\""}));
                p.setArray(3, c.createArrayOf("float8", new Double[] {1.5, -2.0}));
                ResultSet rs = p.executeQuery();
                rs.next();
                Object[] i = (Object[]) rs.getArray(1).getArray();
                Object[] t = (Object[]) rs.getArray(2).getArray();
                Object[] f = (Object[]) rs.getArray(3).getArray();
                check(Arrays.equals(i, new Integer[] {1, null, -3}), "int4[] parameter" + r + ": " + Arrays.toString(i));
                check(Arrays.equals(t, new String[] {"a", "b c", null, "\"q\""}), "text[] parameter" + r + ": " + Arrays.toString(t));
                check(Arrays.equals(f, new Double[] {1.5, -2.0}), "float8[] parameter" + r + ": " + Arrays.toString(f));
                check(rs.getArray(1).getBaseType() == Types.INTEGER && rs.getMetaData().getColumnTypeName(1).equals("_int4"),
                      "int4[] result type" + r + ": " + rs.getMetaData().getColumnTypeName(1));
            }
            try (PreparedStatement p = c.prepareStatement(
                     "SELECT string_agg(x::text, ',' ORDER BY x) FROM generate_series(1, 10) g(x) WHERE x = ANY (?)")) {
                p.setArray(1, c.createArrayOf("int8", new Long[] {2L, 4L, 40L}));
                ResultSet rs = p.executeQuery();
                rs.next();
                check("2,4".equals(rs.getString(1)), "x = ANY (int8[] parameter)" + r + ": " + rs.getString(1));
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO tjd_arr VALUES (?, ?, ?)")) {
                p.setLong(1, run);
                p.setArray(2, c.createArrayOf("text", new String[] {"r" + run, "x y"}));
                p.setArray(3, c.createArrayOf("int4", new Integer[] {run, run * 10}));
                check(p.executeUpdate() == 1, "INSERT array columns" + r);
            }
            try (PreparedStatement p = c.prepareStatement("SELECT tags, nums FROM tjd_arr WHERE id = ?")) {
                p.setLong(1, run);
                ResultSet rs = p.executeQuery();
                check(rs.next(), "row " + run + " found");
                Object[] t = (Object[]) rs.getArray(1).getArray();
                Object[] n = (Object[]) rs.getArray(2).getArray();
                check(Arrays.equals(t, new String[] {"r" + run, "x y"}) && Arrays.equals(n, new Integer[] {run, run * 10}),
                      "array columns read back" + r + ": " + Arrays.toString(t) + " " + Arrays.toString(n));
            }
        }
        for (int run = 0; run < 7; run++) {
            String r = " (run " + run + ")";
            java.sql.Date d = java.sql.Date.valueOf("2024-02-" + (10 + run));
            java.sql.Time t = java.sql.Time.valueOf("10:3" + run + ":00");
            java.sql.Timestamp ts = java.sql.Timestamp.valueOf("2024-03-0" + (1 + run) + " 12:34:56.789");
            try (PreparedStatement p = c.prepareStatement("INSERT INTO tjd_dt VALUES (?, ?, ?, ?, ?::interval)")) {
                p.setLong(1, run);
                p.setDate(2, d);
                p.setTime(3, t);
                p.setTimestamp(4, ts);
                p.setString(5, run + " days 02:00:00");
                check(p.executeUpdate() == 1, "INSERT date / time / timestamp / interval" + r);
            }
            try (PreparedStatement p = c.prepareStatement(
                     "SELECT d, t, ts, iv, d + 1, iv * 2 FROM tjd_dt WHERE id = ? AND d >= ?")) {
                p.setLong(1, run);
                p.setDate(2, java.sql.Date.valueOf("2024-01-01"));
                ResultSet rs = p.executeQuery();
                check(rs.next(), "date row " + run + " found");
                check(d.equals(rs.getDate(1)) && t.equals(rs.getTime(2)) && ts.equals(rs.getTimestamp(3)),
                      "date / time / timestamp read back" + r + ": " + rs.getDate(1) + " " + rs.getTime(2) + " " + rs.getTimestamp(3));
                /* as text: pgjdbc's PGInterval looks the type up through current_schemas() */
                org.postgresql.util.PGInterval iv = new org.postgresql.util.PGInterval(rs.getString(4));
                org.postgresql.util.PGInterval iv2 = new org.postgresql.util.PGInterval(rs.getString(6));
                check(iv.getDays() == run && iv.getHours() == 2 && iv2.getDays() == 2 * run && iv2.getHours() == 4,
                      "interval read back" + r + ": " + iv + " / " + iv2);
                check(java.sql.Date.valueOf("2024-02-" + (11 + run)).equals(rs.getDate(5)),
                      "date + 1" + r + ": " + rs.getDate(5));
            }
        }
        st.execute("CREATE TABLE tjd_misc (id int8 PRIMARY KEY, u uuid, b bytea, j jsonb)");
        for (int run = 0; run < 7; run++) {
            String r = " (run " + run + ")";
            java.util.UUID u = java.util.UUID.randomUUID();
            byte[] bytes = new byte[] {0, (byte) 255, (byte) run, 92};
            try (PreparedStatement p = c.prepareStatement("INSERT INTO tjd_misc VALUES (?, ?, ?, ?::jsonb)")) {
                p.setLong(1, run);
                p.setObject(2, u);
                p.setBytes(3, bytes);
                p.setString(4, "{\"run\": " + run + ", \"tags\": [\"a\"]}");
                check(p.executeUpdate() == 1, "INSERT uuid / bytea / jsonb" + r);
            }
            try (PreparedStatement p = c.prepareStatement(
                     "SELECT u, b, j, j ->> 'run', j -> 'tags' FROM tjd_misc WHERE id = ? AND u = ?")) {
                p.setLong(1, run);
                p.setObject(2, u);
                ResultSet rs = p.executeQuery();
                check(rs.next(), "uuid row " + run + " found by its uuid");
                check(u.equals(rs.getObject(1)) && Arrays.equals(bytes, rs.getBytes(2)) &&
                      ("{\"run\": " + run + ", \"tags\": [\"a\"]}").equals(rs.getString(3)) &&
                      String.valueOf(run).equals(rs.getString(4)) && "[\"a\"]".equals(rs.getString(5)),
                      "uuid / bytea / jsonb read back" + r + ": " + rs.getObject(1) + " " +
                      Arrays.toString(rs.getBytes(2)) + " " + rs.getString(3));
            }
        }
        st.execute("CREATE TABLE tjd_num (id int8 PRIMARY KEY, p numeric(10,2))");
        for (int run = 0; run < 7; run++) {
            String r = " (run " + run + ")";
            try (PreparedStatement p = c.prepareStatement("INSERT INTO tjd_num VALUES (?, ?)")) {
                p.setLong(1, run);
                p.setBigDecimal(2, new java.math.BigDecimal("7.125" + run));
                check(p.executeUpdate() == 1, "INSERT numeric(10,2)" + r);
            }
            try (PreparedStatement p = c.prepareStatement("SELECT p FROM tjd_num WHERE id = ?")) {
                p.setLong(1, run);
                ResultSet rs = p.executeQuery();
                rs.next();
                java.math.BigDecimal want = new java.math.BigDecimal("7.125" + run).setScale(2, java.math.RoundingMode.HALF_UP);
                check(want.equals(rs.getBigDecimal(1)) && rs.getMetaData().getScale(1) == 2 &&
                      rs.getMetaData().getPrecision(1) == 10,
                      "numeric(10,2) column rounds, keeps its scale and is described" + r + ": " + rs.getBigDecimal(1) +
                      " (" + rs.getMetaData().getPrecision(1) + "," + rs.getMetaData().getScale(1) + ")");
            }
        }
        for (int run = 0; run < 7; run++) {
            String r = " (run " + run + ")";
            java.math.BigDecimal x = new java.math.BigDecimal("12.5" + run);
            try (PreparedStatement p = c.prepareStatement(
                     "SELECT ? + ?, ?::numeric / 3, round(?, 1), ?::numeric(6,3), '0.1'::numeric + '0.2'::numeric")) {
                p.setBigDecimal(1, x);
                p.setBigDecimal(2, new java.math.BigDecimal("0.005"));
                p.setBigDecimal(3, x);
                p.setBigDecimal(4, x);
                p.setBigDecimal(5, x);
                ResultSet rs = p.executeQuery();
                rs.next();
                java.math.BigDecimal q = x.divide(new java.math.BigDecimal(3), 16, java.math.RoundingMode.HALF_UP);
                check(rs.getBigDecimal(1).equals(x.add(new java.math.BigDecimal("0.005"))) &&
                      rs.getBigDecimal(2).equals(q) &&
                      rs.getBigDecimal(3).equals(x.setScale(1, java.math.RoundingMode.HALF_UP)) &&
                      rs.getBigDecimal(4).equals(x.setScale(3)) &&
                      rs.getBigDecimal(5).equals(new java.math.BigDecimal("0.3")),
                      "numeric BigDecimal parameters and results" + r + ": " + rs.getBigDecimal(1) + " " +
                      rs.getBigDecimal(2) + " " + rs.getBigDecimal(3) + " " + rs.getBigDecimal(4) + " " +
                      rs.getBigDecimal(5));
            }
        }
        try {
            st.executeQuery("SELECT '{1,2'::int4[]");
            check(false, "malformed array literal accepted");
        } catch (SQLException e) {
            check("22P02".equals(e.getSQLState()), "malformed array literal is 22P02: " + e.getSQLState());
        }
        c.close();
    }
}
"""


def run(ctx):
    if not (shutil.which("javac") and shutil.which("java") and os.path.exists(JAR)):
        ctx.check(False, "javac or the JDBC driver is missing (make deps installs "
                  "openjdk-17-jdk-headless and libpostgresql-jdbc-java)")
        return
    work = os.path.join(ctx.work, "jdbc-types")
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "TypesJdbc.java")
    with open(src, "w") as f:
        f.write(JAVA)
    p = subprocess.run(["javac", "-cp", JAR, "-d", work, src], capture_output=True, text=True, timeout=300)
    if not ctx.check(p.returncode == 0, "javac: %s" % p.stderr[-800:]):
        return
    p = subprocess.run(["java", "-cp", "%s:%s" % (work, JAR), "TypesJdbc", str(ctx.srv.pg_port)],
                       capture_output=True, text=True, timeout=300)
    n = 0
    for line in p.stdout.splitlines():
        if line.startswith("CHECK "):
            ok, what = line[6:].split(" ", 1)
            ctx.check(ok == "ok", what)
            n += 1
    ctx.check(p.returncode == 0 and n > 0, "the JDBC program ran to the end (%d checks): %s" %
              (n, p.stderr[-1500:]))
