// java.net.http.HttpClient against `pytest-toolnexus serve`: one streamed chat, each SSE data
// line printed with the seconds since the request was handed to the client.
// Run: java StreamClient.java URL
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.stream.Stream;

public class StreamClient {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        String body = "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"stream\":true}";
        HttpRequest request = HttpRequest.newBuilder(URI.create(args[0] + "/chat/completions"))
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build();
        long start = System.nanoTime();
        HttpResponse<Stream<String>> response = client.send(request, HttpResponse.BodyHandlers.ofLines());
        System.out.println("status " + response.statusCode());
        response.body().filter(line -> line.startsWith("data: ")).forEach(line -> {
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.println(seconds + " " + line.substring(6));
            System.out.flush();
        });
    }
}
