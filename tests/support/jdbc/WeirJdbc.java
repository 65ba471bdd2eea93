// A JDBC client of weir's Postgres endpoint (tests/shell/test_serve_jdbc.py compiles and runs it):
// what a JDBC tool does on connect — list tables and columns through DatabaseMetaData — then a
// query, and a PreparedStatement with a parameter (pgjdbc sends it with the extended protocol).
// Usage: java -cp postgresql.jar:. WeirJdbc jdbc:postgresql://127.0.0.1:PORT/weir TABLE KEY_COLUMN KEY
// Prints lines "table <name> <type>", "column <table> <name> <type name> <java type>",
// "row <values tab-separated>", "prepared <values>", "prepared-binary <values>".
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.Statement;
import java.util.Properties;

public class WeirJdbc {
    public static void main(String[] args) throws Exception {
        String url = args[0], table = args[1], key = args[2];
        long value = Long.parseLong(args[3]);
        Properties props = new Properties();
        props.setProperty("user", "jdbc");
        props.setProperty("ApplicationName", "weir-jdbc-test");
        try (Connection con = DriverManager.getConnection(url, props)) {
            DatabaseMetaData meta = con.getMetaData();
            System.out.println("product " + meta.getDatabaseProductName() + " " + meta.getDatabaseMajorVersion());
            try (ResultSet tables = meta.getTables(null, null, "%", new String[] {"TABLE", "VIEW"})) {
                while (tables.next()) {
                    System.out.println("table " + tables.getString("TABLE_NAME") + " " + tables.getString("TABLE_TYPE"));
                }
            }
            try (ResultSet columns = meta.getColumns(null, null, table, "%")) {
                while (columns.next()) {
                    System.out.println("column " + columns.getString("TABLE_NAME") + " " + columns.getString("COLUMN_NAME")
                            + " " + columns.getString("TYPE_NAME") + " " + columns.getInt("DATA_TYPE"));
                }
            }
            try (ResultSet schemas = meta.getSchemas()) {
                while (schemas.next()) {
                    System.out.println("schema " + schemas.getString("TABLE_SCHEM"));
                }
            }
            try (ResultSet keys = meta.getPrimaryKeys(null, null, table)) {
                int count = 0;
                while (keys.next()) {
                    count++;
                }
                System.out.println("primary keys " + count);
            }
            try (ResultSet types = meta.getTypeInfo()) {
                StringBuilder names = new StringBuilder();
                while (types.next()) {
                    names.append(" ").append(types.getString("TYPE_NAME"));
                }
                System.out.println("type info" + names);
            }
            con.setReadOnly(true);
            con.setAutoCommit(false);
            try (Statement st = con.createStatement();
                 ResultSet rs = st.executeQuery("SELECT * FROM " + table + " ORDER BY " + key)) {
                print("row", rs);
            }
            try (PreparedStatement ps = con.prepareStatement("SELECT * FROM " + table + " WHERE " + key + " = ?")) {
                // pgjdbc prepares on the server from the 5th execution on and then reads binary results.
                for (int i = 0; i < 6; i++) {
                    ps.setLong(1, value);
                    try (ResultSet rs = ps.executeQuery()) {
                        print(i < 5 ? "prepared" : "prepared-again", rs);
                    }
                }
            }
            try (PreparedStatement ps = con.prepareStatement(
                    "SELECT " + key + ", ts, d FROM " + table + " WHERE name = ? AND ts >= ?")) {
                ps.setString(1, "name" + value);
                ps.setTimestamp(2, java.sql.Timestamp.valueOf("2024-01-01 00:00:00"));
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        System.out.println("typed " + rs.getLong(1) + " " + rs.getTimestamp(2) + " " + rs.getBigDecimal(3));
                    }
                }
            }
            try (PreparedStatement ps = con.prepareStatement(
                    "SELECT " + key + ", " + key + ", name FROM " + table + " WHERE " + key + " = ?")) {
                ResultSetMetaData md = ps.getMetaData();  // described before it runs (Describe of the statement)
                StringBuilder names = new StringBuilder("described");
                for (int i = 1; i <= md.getColumnCount(); i++) {
                    names.append(" ").append(md.getColumnLabel(i)).append(":").append(md.getColumnTypeName(i));
                }
                System.out.println(names);
            }
            con.commit();
        }
    }

    static void print(String tag, ResultSet rs) throws Exception {
        ResultSetMetaData md = rs.getMetaData();
        while (rs.next()) {
            StringBuilder line = new StringBuilder(tag);
            for (int i = 1; i <= md.getColumnCount(); i++) {
                line.append(i == 1 ? " " : "\t").append(rs.getString(i));
            }
            System.out.println(line);
        }
    }
}
