#include "lsp/stdio_loop.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <variant>

#include "lsp/json_rpc.h"

namespace orch::lsp {

namespace {

struct Message {
  std::string body;
};
struct BadMessage {
  std::string why;
};
struct EndOfInput {};
using Task = std::function<void()>;
using Event = std::variant<Message, BadMessage, EndOfInput, Task>;

class Queue {
 public:
  void push(Event e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_one();
  }
  // The next event, or nullopt when `deadline` passes first.
  std::optional<Event> pop(std::optional<Clock::time_point> deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return !events_.empty(); };
    if (deadline) {
      if (!cv_.wait_until(lock, *deadline, ready)) return std::nullopt;
    } else {
      cv_.wait(lock, ready);
    }
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
};

}  // namespace

int serve(std::istream& in, std::ostream& out, const ServerOptions& options) {
  // Shared with the reader thread, which may outlive this function: a client that sends `exit`
  // may keep its end of the input open, and the reader is then left blocked in a read.
  auto shared = std::make_shared<Queue>();
  Queue& queue = *shared;
  Server server(
      options,
      [&](const std::string& body) { out << frame_message(body) << std::flush; },
      [&](std::function<void()> task) { queue.push(Task(std::move(task))); });
  // std::cin is tied to std::cout: every read would flush the output from the reader thread,
  // racing the writes of this one (a message sent twice, or torn). Only this thread writes.
  in.tie(nullptr);
  std::thread reader([reader_queue = shared, &in] {
    MessageReader reader(in);
    for (;;) {
      std::string body, error;
      MessageReader::Status st = reader.read(&body, &error);
      if (st == MessageReader::Status::Eof) break;
      if (st == MessageReader::Status::Bad) reader_queue->push(BadMessage{error});
      else reader_queue->push(Message{std::move(body)});
    }
    reader_queue->push(EndOfInput{});
  });
  int code = 1;
  bool input_ended = false;
  for (;;) {
    std::optional<Event> e = queue.pop(server.next_due());
    if (!e) {
      server.run_due(Clock::now());
      continue;
    }
    if (auto* m = std::get_if<Message>(&*e)) {
      if (!server.handle(m->body)) {
        code = server.exit_code();
        break;
      }
    } else if (auto* b = std::get_if<BadMessage>(&*e)) {
      server.bad_message(b->why);
    } else if (std::holds_alternative<EndOfInput>(*e)) {
      input_ended = true;
      break;
    } else if (auto* t = std::get_if<Task>(&*e)) {
      (*t)();
    }
  }
  server.wait_for_compile();
  if (input_ended) reader.join();
  else reader.detach();  // blocked in a read of the input: the process exit ends it
  return code;
}

}  // namespace orch::lsp
